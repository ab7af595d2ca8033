// The composer's attachments: the attach button, files dropped anywhere on
// the page, and images pasted into the message box. Each file is uploaded
// at once with POST /api/uploads (docs/protocol.md) and shows in the tray
// above the box with a progress bar, then a thumbnail; message.send names
// the uploaded ones by their sha256 (see take).
//
// DOM contract (browser tests rely on it):
//
//   #attach                  button that opens the file picker (#attach-input)
//   #attachments             the tray (hidden while empty): one
//     li.upload[data-state=uploading|done|error] per file, data-sha256 once
//     uploaded; progress.upload-progress while it goes, img.thumb (an image)
//     or .att-name once done, p.upload-error (role=alert) with the server's or
//     the browser's reason when refused, button.remove-upload to drop it
//   #attach-status           role=status: why Send waits
//   #composer.dragging       while files are dragged over the page
//
// Nothing typed is touched: a refused file shows its reason in the tray and
// the text stays in the box.

import { el } from './dom.js';
import { blobURL, extLabel, fmtSize, isInlineImage } from './media.js';

// Types the browser may not name (an empty File.type) but whose content is
// text the server accepts as such.
const TEXT_EXT = /\.(md|markdown|txt|log|csv|tsv|json|ya?ml|toml|ini|go|py|js|mjs|ts|tsx|jsx|rs|c|h|cc|cpp|hpp|java|kt|rb|php|sh|sql|html?|css|xml)$/i;

// declaredType is the Content-Type an upload is sent with.
export function declaredType(file) {
  if (file.type) return file.type;
  return TEXT_EXT.test(file.name || '') ? 'text/plain' : 'application/octet-stream';
}

function kindLimit(limits, type) {
  if (!limits) return 0;
  if (type.startsWith('image/')) return limits.max_image_bytes;
  if (type.startsWith('audio/')) return limits.max_audio_bytes;
  return limits.max_document_bytes;
}

function kindName(type) {
  return type.startsWith('image/') ? 'an image' : type.startsWith('audio/') ? 'an audio file' : 'a document';
}

// refusal turns an upload's answer into the sentence the tray shows.
function refusal(status, body) {
  let msg = '';
  try {
    msg = JSON.parse(body || '{}').message || '';
  } catch {
    // not JSON: a proxy's page
  }
  if (status === 413) return msg || 'The file is too large.';
  if (status === 400) return msg || 'The server refused this file.';
  if (status === 401) return 'Signed out — log in again, then attach the file again.';
  if (status === 408) return 'The file took too long to arrive.';
  return msg || `The upload failed (HTTP ${status}).`;
}

let nextId = 0;

// initAttach wires the composer; onChange is called whenever the tray
// changes (the caller re-renders what depends on it); chat returns the open
// chat's id, which an upload names so a refusal is kept in its record.
export function initAttach({ form, input, onChange = () => {}, chat = () => null }) {
  const button = document.getElementById('attach');
  const picker = document.getElementById('attach-input');
  const tray = document.getElementById('attachments');
  const status = document.getElementById('attach-status');
  const items = []; // {id, file, name, size, type, state, progress, attachment, error, xhr}
  let limits = null;
  let limitsAsked = null;
  let whenUp = null; // what Send asked for while files were still going up

  function askLimits() {
    limitsAsked ??= fetch('/api/uploads/limits', { credentials: 'same-origin' })
      .then((r) => (r.ok ? r.json() : null))
      .then((l) => (limits = l))
      .catch(() => null);
    return limitsAsked;
  }

  function changed() {
    draw();
    onChange();
    if (!whenUp || busy()) return;
    const go = whenUp;
    whenUp = null;
    if (items.some((x) => x.state === 'error')) {
      say('A file was refused — remove it (×), then send.');
      return;
    }
    say('');
    go();
  }

  function say(text) {
    status.textContent = text || '';
    status.hidden = !text;
  }

  async function add(files) {
    files = [...files].filter((f) => f && typeof f.size === 'number');
    if (!files.length) return;
    if (!whenUp) say('');
    await askLimits();
    for (const file of files) {
      const type = declaredType(file);
      const it = { id: ++nextId, file, name: file.name || 'file', size: file.size, type, state: 'uploading', progress: 0, attachment: null, error: null, xhr: null };
      items.push(it);
      const limit = kindLimit(limits, type);
      const max = limits?.max_attachments || 20;
      if (items.length > max) {
        it.state = 'error';
        it.error = `A message may carry at most ${max} files.`;
      } else if (file.size === 0) {
        it.state = 'error';
        it.error = 'The file is empty.';
      } else if (limit > 0 && file.size > limit) {
        it.state = 'error';
        it.error = `${kindName(type)[0].toUpperCase()}${kindName(type).slice(1)} may be at most ${fmtSize(limit)}; this one is ${fmtSize(file.size)}.`;
      } else {
        upload(it);
      }
    }
    changed();
  }

  function upload(it) {
    const xhr = new XMLHttpRequest();
    it.xhr = xhr;
    // The chat it is meant for keeps a diagnostic if the server refuses it.
    const to = chat();
    xhr.open('POST', `/api/uploads?name=${encodeURIComponent(it.name)}${to ? `&chat=${encodeURIComponent(to)}` : ''}`);
    xhr.setRequestHeader('Content-Type', it.type);
    xhr.upload.addEventListener('progress', (e) => {
      if (!e.lengthComputable) return;
      it.progress = e.loaded / e.total;
      const bar = tray.querySelector(`li[data-upload="${it.id}"] progress`);
      if (bar) bar.value = it.progress; // no full redraw per progress tick
    });
    xhr.addEventListener('load', () => {
      it.xhr = null;
      if (xhr.status === 201) {
        try {
          it.attachment = JSON.parse(xhr.responseText).attachment;
        } catch {
          it.attachment = null;
        }
      }
      if (it.attachment && it.attachment.sha256) {
        it.state = 'done';
        it.progress = 1;
      } else {
        it.state = 'error';
        it.error = refusal(xhr.status, xhr.responseText);
      }
      changed();
    });
    const failed = (why) => () => {
      if (it.state !== 'uploading') return;
      it.xhr = null;
      it.state = 'error';
      it.error = why;
      changed();
    };
    xhr.addEventListener('error', failed('The upload failed: the connection broke. Remove the file and attach it again.'));
    xhr.addEventListener('timeout', failed('The upload took too long.'));
    xhr.send(it.file);
  }

  function remove(id) {
    const i = items.findIndex((x) => x.id === id);
    if (i < 0) return;
    const [it] = items.splice(i, 1);
    if (it.xhr) {
      it.state = 'removed';
      it.xhr.abort();
    }
    if (!busy() && !whenUp) say('');
    changed();
  }

  function busy() {
    return items.some((x) => x.state === 'uploading');
  }

  function draw() {
    tray.hidden = items.length === 0;
    tray.replaceChildren(...items.map((it) => {
      const li = el('li', { class: 'upload', 'data-state': it.state, 'data-upload': it.id, 'data-sha256': it.attachment?.sha256 });
      const a = it.attachment;
      if (it.state === 'done' && isInlineImage(a.type)) {
        li.append(el('img', { class: 'thumb', src: blobURL(a, true), alt: a.name || it.name }));
      } else {
        li.append(el('span', { class: 'att-icon', 'aria-hidden': 'true' }, extLabel(it.name, it.type)));
      }
      const info = el('span', { class: 'upload-info' }, el('span', { class: 'att-name', title: it.name }, it.name), el('span', { class: 'att-size' }, fmtSize(it.size)));
      li.append(info);
      if (it.state === 'uploading') {
        info.append(el('progress', { class: 'upload-progress', max: '1', value: String(it.progress), 'aria-label': `Uploading ${it.name}` }));
      }
      if (it.error) li.append(el('p', { class: 'upload-error', role: 'alert' }, it.error));
      const rm = el('button', { class: 'remove-upload', type: 'button', 'aria-label': `Remove ${it.name}`, title: `Remove ${it.name}` }, '×');
      rm.addEventListener('click', () => {
        remove(it.id);
        input.focus();
      });
      li.append(rm);
      return li;
    }));
  }

  // Files dragged over any part of the page may be dropped on it.
  const hasFiles = (e) => [...(e.dataTransfer?.types || [])].includes('Files');
  let depth = 0;
  document.addEventListener('dragenter', (e) => {
    if (!hasFiles(e)) return;
    depth++;
    form.classList.add('dragging');
  });
  document.addEventListener('dragleave', (e) => {
    if (!hasFiles(e)) return;
    if (--depth <= 0) {
      depth = 0;
      form.classList.remove('dragging');
    }
  });
  document.addEventListener('dragover', (e) => {
    if (!hasFiles(e)) return;
    e.preventDefault(); // allow the drop (else the browser opens the file)
    e.dataTransfer.dropEffect = 'copy';
  });
  document.addEventListener('drop', (e) => {
    depth = 0;
    form.classList.remove('dragging');
    if (!e.dataTransfer?.files?.length) return;
    e.preventDefault();
    add(e.dataTransfer.files);
    input.focus();
  });

  // A pasted image (a screenshot) attaches; pasted text stays text. A
  // clipboard with text as well (cells of a sheet also come as a picture)
  // pastes the text only.
  input.addEventListener('paste', (e) => {
    const dt = e.clipboardData;
    if (!dt || !dt.files?.length || [...dt.types].includes('text/plain')) return;
    e.preventDefault();
    add(dt.files);
  });

  button.addEventListener('click', () => picker.click());
  picker.addEventListener('change', () => {
    add(picker.files);
    picker.value = ''; // the same file may be picked again
    input.focus();
  });

  return {
    add,
    busy,
    say,
    // afterUploads runs send once every file is up (at once if none is
    // going), unless one was refused meanwhile: the tray then says so and
    // nothing is sent.
    afterUploads(send) {
      whenUp = send;
      say('Sending once the files are up…');
      changed();
    },
    // count is how many files would go with the next message.
    count: () => items.filter((x) => x.state === 'done').length,
    // take returns the uploaded attachments for message.send and empties
    // the tray (refused files go with it: their reason was shown).
    take() {
      const out = items.filter((x) => x.state === 'done').map((x) => x.attachment);
      items.length = 0;
      say('');
      changed();
      return out;
    },
  };
}
