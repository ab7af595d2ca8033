#!/usr/bin/env bash
# vendor.sh fetches the browser libraries of the web client from the npm
# registry at PINNED versions, checks each tarball against the integrity
# hash written here, and copies their browser builds and licenses into
# static/vendor/. Run it by hand after changing a pin, then commit the
# result: `go run` and the tests use the committed files and fetch nothing.
#
#   bash gateway/web/vendor.sh
#
# It needs npm and tar. To update a library: change its version, run
# `npm view NAME@VERSION dist.integrity`, paste the hash, rerun, and check
# the pages (go test ./gateway/ -run Browser).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
out="$here/static/vendor"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# name@version  integrity (sha512, as the registry's dist.integrity says)
pins=(
  "marked@18.3.0 sha512-ed8zmPXlBb3UfGXN5iHMQyMhFpdqLgoV5umUXx/Q1R+FW3q8VpqpyoKUwlENL9appo2UMvNLURDVaT3AMOryGA=="
  "dompurify@3.5.0 sha512-LYC0ZkE8P1V42JsRYTwMdme/2ET8SpOc5AA2eOFjP/IadvRd2fwiT4TVz5vkfy0XUx12aS2UaRkTnfVPNOv9vw=="
  "@highlightjs/cdn-assets@11.12.0 sha512-KvOKXODaiFmId9xaq3xc5xCL66wVLUuOngDbO9B/kewbFTqdGbn2nJxNhN3H5R1cgDTVj6R8vH0zgiNDEGjpDw=="
  "uplot@1.6.32 sha512-KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw=="
  "axe-core@4.14.1 sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ=="
)

# fetch NAME@VERSION INTEGRITY DIR: the package's contents under DIR/package.
fetch() {
  local spec="$1" want="$2" dir="$3"
  mkdir -p "$dir"
  local file
  file="$(cd "$dir" && npm pack --silent "$spec")"
  local got="sha512-$(openssl dgst -sha512 -binary "$dir/$file" | base64 -w0)"
  if [[ "$got" != "$want" ]]; then
    echo "vendor.sh: $spec: integrity $got, pinned $want" >&2
    exit 1
  fi
  tar -xzf "$dir/$file" -C "$dir"
}

for p in "${pins[@]}"; do
  spec="${p%% *}"
  name="${spec%@*}"
  fetch "$spec" "${p#* }" "$tmp/${name//[@\/]/_}"
done

rm -rf "$out"
axe="$here/testdata/axe"
rm -rf "$axe"
mkdir -p "$out"/{marked,dompurify,highlight,uplot} "$axe"

# copy SRC DST: one file, from a package's folder.
copy() { install -m 0644 "$1" "$2"; }

pkg="$tmp/marked/package"
copy "$pkg/lib/marked.esm.js" "$out/marked/marked.esm.js"
copy "$pkg/LICENSE" "$out/marked/LICENSE"

pkg="$tmp/dompurify/package"
copy "$pkg/dist/purify.es.mjs" "$out/dompurify/purify.es.mjs"
copy "$pkg/LICENSE" "$out/dompurify/LICENSE"

# The common-languages build as an ES module, and one theme per scheme:
# a11y-light and a11y-dark, made to keep WCAG AA contrast (4.5:1).
pkg="$tmp/_highlightjs_cdn-assets/package"
copy "$pkg/es/highlight.min.js" "$out/highlight/highlight.min.js"
copy "$pkg/styles/a11y-light.min.css" "$out/highlight/a11y-light.min.css"
copy "$pkg/styles/a11y-dark.min.css" "$out/highlight/a11y-dark.min.css"
copy "$pkg/LICENSE" "$out/highlight/LICENSE"

pkg="$tmp/uplot/package"
copy "$pkg/dist/uPlot.esm.js" "$out/uplot/uPlot.esm.js"
copy "$pkg/dist/uPlot.min.css" "$out/uplot/uPlot.min.css"
copy "$pkg/LICENSE" "$out/uplot/LICENSE"

# axe-core is for the browser tests only: kept out of static/, so the
# binary neither embeds nor serves it; the tests inject it into the page.
pkg="$tmp/axe-core/package"
copy "$pkg/axe.min.js" "$axe/axe.min.js"
copy "$pkg/LICENSE" "$axe/LICENSE"

{
  echo "Vendored by gateway/web/vendor.sh from the npm registry; do not edit."
  echo "Change a version there and rerun it."
  echo
  for p in "${pins[@]}"; do echo "$p"; done
} >"$out/VERSIONS"
echo "vendored into $out"
