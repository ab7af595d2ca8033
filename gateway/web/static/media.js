// Attachments as the conversation shows them: thumbnails of a person's
// files (in the queue, the outbox and the transcript), a voice note with
// its transcript (message.transcribed), and what the assistant sent
// (file.sent): an inline image that opens full size, or a download link.
//
// DOM contract (browser tests rely on it):
//
//   .attachments                    the files of one message, under its text
//     a.attachment.image            an image: href the full file (new tab),
//                                   holding img.thumb (alt = its name)
//     .attachment.audio             a voice note or audio file: audio[controls],
//                                   p.transcript once transcribed, or
//                                   p.transcript-error (role=alert) when the
//                                   transcription failed
//     a.attachment.file[download]   anything else: a download link with the
//                                   name (.att-name) and size (.att-size)
//     button.remove-attachment[data-sha256]  on a queued message's files:
//                                   message.edit without that file
//
// Files come from GET /api/blobs/{sha256} (docs/protocol.md), same origin,
// so the page's img-src 'self' covers them and no blob: or data: URL is
// needed.

import { el } from './dom.js';

// Image types the browser shows inline; the route serves just these inline.
const INLINE = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/avif', 'image/bmp']);

export function isInlineImage(type) {
  return INLINE.has(String(type || ''));
}

// blobURL is where an attachment's bytes are served; thumb asks for a
// thumbnail (the same bytes today: the browser scales them).
export function blobURL(a, thumb = false) {
  const q = new URLSearchParams();
  if (a.name) q.set('name', a.name);
  if (thumb) q.set('thumb', '1');
  const qs = q.toString();
  return `/api/blobs/${encodeURIComponent(a.sha256)}${qs ? '?' + qs : ''}`;
}

export function fmtSize(n) {
  n = Number(n) || 0;
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(n >= 10 << 20 ? 0 : 1)} MB`;
  if (n >= 1024) return `${(n / 1024).toFixed(n >= 10240 ? 0 : 1)} KB`;
  return `${n} B`;
}

// extLabel is the short type a file icon shows: its name's extension, else
// the media subtype.
export function extLabel(name, type) {
  const m = /\.([a-z0-9]{1,5})$/i.exec(String(name || ''));
  return (m ? m[1] : String(type || '').split('/')[1] || 'file').slice(0, 4).toUpperCase();
}

function label(a) {
  return a.name || (isInlineImage(a.type) ? 'image' : String(a.type || 'file'));
}

// attachmentsSig is what a render signature needs to know of a message's
// attachments.
export function attachmentsSig(m) {
  return JSON.stringify([(m.attachments || []).map((a) => [a.sha256, a.name, a.transcript || '']), m.transcribe_error || '']);
}

// thumbImage is an image's thumbnail, sized from its stored pixels so the
// page does not jump when it loads.
function thumbImage(a, cls) {
  const attrs = { class: cls, src: blobURL(a, true), alt: label(a), loading: 'lazy', decoding: 'async' };
  if (a.width > 0 && a.height > 0) {
    attrs.width = a.width;
    attrs.height = a.height;
  }
  return el('img', attrs);
}

// attachmentsEl renders m.attachments; null when there are none. With
// removable, each file has a remove button (a queued message's); busy
// disables them while an edit is in flight.
export function attachmentsEl(m, { removable = false, busy = false, large = false } = {}) {
  const atts = Array.isArray(m.attachments) ? m.attachments.filter((a) => a && a.sha256) : [];
  if (!atts.length) return null;
  const box = el('div', { class: 'attachments' + (large ? ' large' : '') });
  for (const a of atts) {
    const name = label(a);
    let item;
    if (isInlineImage(a.type)) {
      item = el('a', { class: 'attachment image', href: blobURL(a), target: '_blank', rel: 'noopener',
        title: `${name} · ${fmtSize(a.size)}${a.width ? ` · ${a.width}×${a.height}` : ''} — open full size` },
      thumbImage(a, 'thumb'));
    } else if (String(a.type || '').startsWith('audio/')) {
      item = el('div', { class: 'attachment audio' },
        el('audio', { controls: true, preload: 'none', src: blobURL(a), 'aria-label': `Voice note ${name}` }),
        el('a', { class: 'att-link', href: blobURL(a), download: name }, el('span', { class: 'att-name' }, name), ' ', el('span', { class: 'att-size' }, fmtSize(a.size))));
      if (a.transcript) item.append(el('p', { class: 'transcript' }, a.transcript));
      else if (m.transcribe_error) item.append(el('p', { class: 'transcript-error', role: 'alert' }, `Not transcribed: ${m.transcribe_error}`));
    } else {
      item = el('a', { class: 'attachment file', href: blobURL(a), download: name, title: `Download ${name}` },
        el('span', { class: 'att-icon', 'aria-hidden': 'true' }, extLabel(a.name, a.type)),
        el('span', { class: 'att-name' }, name),
        el('span', { class: 'att-size' }, fmtSize(a.size)));
    }
    if (removable) {
      const wrap = el('div', { class: 'attachment-wrap' }, item,
        el('button', { class: 'remove-attachment', type: 'button', 'data-sha256': a.sha256, 'aria-label': `Remove ${name}`, title: `Remove ${name}`, disabled: busy }, '×'));
      box.append(wrap);
    } else {
      box.append(item);
    }
  }
  return box;
}

// withTranscripts merges a message.transcribed event, as events.js reads
// it, into the message the view holds: its attachments now carry their
// transcripts, or the event's error says why none came.
export function withTranscripts(old, ev) {
  const m = ev.message || {};
  const out = { ...old, attachments: Array.isArray(m.attachments) ? m.attachments : old.attachments };
  if (ev.error) out.transcribe_error = ev.error;
  else delete out.transcribe_error;
  return out;
}
