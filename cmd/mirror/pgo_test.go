package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"reflect"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/gateway/ws"
	mruntime "github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/provider/openai"
	"google.golang.org/protobuf/encoding/protowire"
)

var updatePGO = flag.String("update-pgo", "", "rewrite default.pgo from this CPU profile, without the machine's paths (pgo.sh)")

// pprofStrings is the field of pprof's Profile message that holds its
// string table: function names, file names, the mapped binary's path.
const pprofStrings protowire.Number = 6

// TestDefaultPGO checks default.pgo, the profile `go build` and `go run`
// optimise the binary with: it reads as a CPU profile, it holds no path of
// the machine it was taken on, and it covers this code's turn. The
// compiler matches a profile to the code by function name, so a renamed
// hot function leaves the profile silently stale: then run pgo.sh again.
func TestDefaultPGO(t *testing.T) {
	if *updatePGO != "" {
		raw, err := os.ReadFile(*updatePGO)
		if err != nil {
			t.Fatal(err)
		}
		clean, err := withoutPaths(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("default.pgo", clean, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile("default.pgo")
	if err != nil {
		t.Fatal(err)
	}
	strs, err := profileStrings(data)
	if err != nil {
		t.Fatalf("default.pgo: %v", err)
	}
	for _, s := range strs {
		if isMachinePath(s) {
			t.Errorf("default.pgo names a path of the machine it was taken on: %q (run pgo.sh)", s)
		}
	}
	for _, f := range []any{(*chats.Service).SendAttached, (*mruntime.Engine).Run, (*openai.Client).Stream, (*ws.Hub).ServeHTTP} {
		name := goruntime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
		if !slices.Contains(strs, name) {
			t.Errorf("default.pgo does not know %s, on every turn's path: the profile is stale (run pgo.sh)", name)
		}
	}
}

// TestWithoutPaths takes a profile of this process (whose string table
// names the test binary and, without -trimpath, its source files by their
// absolute paths) and checks that withoutPaths leaves no absolute path and
// every other string as it was.
func TestWithoutPaths(t *testing.T) {
	var raw bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&raw, 0); err != nil {
		t.Fatal(err)
	}
	before, err := profileStrings(raw.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(before, isMachinePath) {
		t.Fatalf("the profile holds no absolute path to take out: %q", before)
	}
	clean, err := withoutPaths(raw.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	after, err := profileStrings(clean)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("%d strings before, %d after", len(before), len(after))
	}
	for i, s := range after {
		switch {
		case isMachinePath(before[i]) && s != path.Base(before[i]):
			t.Errorf("%q became %q", before[i], s)
		case !isMachinePath(before[i]) && s != before[i]:
			t.Errorf("%q changed to %q", before[i], s)
		}
	}
	if _, err := withoutPaths([]byte("GO PREPROFILE V1\n")); err == nil {
		t.Error("a preprocessed profile (which go build refuses as default.pgo) was taken as a pprof profile")
	}
}

// isMachinePath reports an absolute path (Unix or Windows).
func isMachinePath(s string) bool {
	return strings.HasPrefix(s, "/") || len(s) > 2 && s[1] == ':' && (s[2] == '\\' || s[2] == '/')
}

// profileStrings reads a pprof profile's string table.
func profileStrings(data []byte) ([]string, error) {
	var strs []string
	_, err := rewriteStrings(data, func(s string) string {
		strs = append(strs, s)
		return s
	})
	return strs, err
}

// withoutPaths is the profile with every absolute path in its string table
// cut to its last element: the mapped binary's path (source paths are
// already relative, from a -trimpath build). The compiler reads only
// function names and line numbers.
func withoutPaths(data []byte) ([]byte, error) {
	out, err := rewriteStrings(data, func(s string) string {
		if isMachinePath(s) {
			return path.Base(strings.ReplaceAll(s, `\`, "/"))
		}
		return s
	})
	if err != nil {
		return nil, err
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	if _, err := zw.Write(out); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return z.Bytes(), nil
}

// rewriteStrings passes each string of a pprof profile's string table
// through f and returns the profile (its protobuf, not gzipped) with what
// f returned. The indexes into the table stay as they were.
func rewriteStrings(data []byte, f func(string) string) ([]byte, error) {
	if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		if data, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	var out []byte
	seen := false
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return nil, fmt.Errorf("not a profile: %w", protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, data[n:])
		if m < 0 {
			return nil, fmt.Errorf("not a profile: %w", protowire.ParseError(m))
		}
		if num == pprofStrings && typ == protowire.BytesType {
			s, _ := protowire.ConsumeBytes(data[n:])
			out = protowire.AppendTag(out, num, typ)
			out = protowire.AppendString(out, f(string(s)))
			seen = true
		} else {
			out = append(out, data[:n+m]...)
		}
		data = data[n+m:]
	}
	if !seen {
		return nil, errors.New("not a profile: no string table")
	}
	return out, nil
}
