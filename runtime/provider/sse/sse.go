// Package sse reads server-sent event streams (text/event-stream) the way
// model APIs send them, and watches a stream body for silence. It owns the
// framing only: what an event's data means is the adapter's business.
//
// The rules followed are the ones Mirror meets in practice: lines end in
// LF, CRLF or a lone CR; a leading BOM is dropped; ":" starts a comment
// (keep-alive); "field: value" drops one space after the colon; data lines
// of one event join with LF; a blank line ends the event; an event left
// open at EOF is still returned (some servers omit the final blank line).
// Unknown fields (id, retry) are ignored.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// ErrLineTooLong is returned (wrapped) for a line longer than the reader's
// limit.
var ErrLineTooLong = errors.New("sse: line too long")

// errTooLong ends the lines of a reader whose window filled without one.
var errTooLong = errors.New("sse: window full")

// Event is one dispatched event. Data is valid until the next call of Next
// (or Release).
type Event struct {
	// Name is the event field ("" when none was sent).
	Name string
	Data []byte
}

// Reader splits a stream into events. It is not safe for concurrent use.
//
// It splits lines itself, over a buffer it takes from a pool and gives
// back on Release: a stream is read per turn, and a scanner and its buffer
// per stream were a few KiB of garbage a turn. The splitting is
// bufio.Scanner's, step for step: a line is found once the buffer holds
// its end, the buffer grows to the limit, and after a read error what is
// left is split as at EOF.
type Reader struct {
	src io.Reader
	// buf[start:end] is read and not yet split; buf[start:start+scanned]
	// holds no line end, so a long line arriving in many small reads is
	// looked through once, not once per read.
	buf                 []byte
	start, end, scanned int
	err                 error // what ended the reads (io.EOF included), sticky
	max                 int
	stopAt              []byte
	data                []byte
	hasData             bool
	name                string
	first               bool
	stopped             bool
}

// initialBuffer is the reader's first buffer: the HTTP client hands the
// body over in reads of its own 4 KiB buffer, so more would sit unused.
const initialBuffer = 4 << 10

// maxPooled bounds a buffer Release keeps: a stream with a line of
// megabytes (one tool call's arguments) gives its buffer to the collector,
// not to every later stream.
const maxPooled = 64 << 10

// maxEmptyReads is how many reads in a row may return nothing before the
// source is taken as stuck (io.ErrNoProgress), as bufio.Scanner does.
const maxEmptyReads = 100

var readers = sync.Pool{New: func() any { return &Reader{buf: make([]byte, initialBuffer)} }}

// NewReader returns a reader of r that accepts lines up to maxLine bytes.
// Release gives its buffers back once its events are no longer needed.
func NewReader(r io.Reader, maxLine int) *Reader {
	rd := readers.Get().(*Reader)
	*rd = Reader{src: r, buf: rd.buf[:min(cap(rd.buf), maxLine)], max: maxLine, data: rd.data[:0], first: true}
	return rd
}

// Release returns the reader's buffers to the pool. Neither the reader
// nor the data of an event it returned may be used afterwards.
func (r *Reader) Release() {
	buf, data := r.buf, r.data
	if cap(buf) > maxPooled || cap(buf) < initialBuffer {
		buf = make([]byte, initialBuffer)
	}
	if cap(data) > maxPooled {
		data = nil
	}
	*r = Reader{buf: buf[:cap(buf)], data: data[:0]}
	readers.Put(r)
}

// StopAt makes a data line equal to data end the stream at once, as
// OpenAI's "data: [DONE]" does: whatever event was open is returned first,
// then Next reports io.EOF without reading further, so a server that holds
// the connection open after the terminator cannot hang the reply.
func (r *Reader) StopAt(data string) { r.stopAt = []byte(data) }

// Stopped reports whether the StopAt terminator was seen.
func (r *Reader) Stopped() bool { return r.stopped }

// Next returns the next event, io.EOF at the end of the stream, or the
// read error (ErrLineTooLong wrapped for an over-long line). An event cut
// off by a read error is not returned.
func (r *Reader) Next() (Event, error) {
	if r.stopped {
		return Event{}, io.EOF
	}
	for {
		line, ok := r.line()
		if !ok {
			break
		}
		if r.first {
			line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
			r.first = false
		}
		if len(line) == 0 {
			if r.hasData {
				return r.take(), nil
			}
			r.name = ""
			continue
		}
		if line[0] == ':' {
			continue // comment, used as keep-alive
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if r.stopAt != nil && bytes.Equal(value, r.stopAt) {
				r.stopped = true
				if r.hasData {
					return r.take(), nil
				}
				return Event{}, io.EOF
			}
			if r.hasData {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, value...)
			r.hasData = true
		case "event":
			r.name = string(value)
		}
	}
	switch r.err {
	case io.EOF:
	case errTooLong:
		return Event{}, fmt.Errorf("%w: longer than %d MiB", ErrLineTooLong, r.max>>20)
	default:
		return Event{}, r.err
	}
	if r.hasData {
		return r.take(), nil
	}
	return Event{}, io.EOF
}

// take returns the open event and starts a new one, reusing the buffer.
func (r *Reader) take() Event {
	ev := Event{Name: r.name, Data: r.data}
	r.data, r.hasData, r.name = r.data[:0], false, ""
	return ev
}

// line returns the next line (ending in LF, CRLF or a lone CR, or the
// stream's last bytes), valid until the next call; false when there is
// none, r.err saying why.
func (r *Reader) line() ([]byte, bool) {
	for {
		// After a read error (EOF included) what is left is split as it
		// is; a line too long ends this call, and a later one splits
		// what the window held the same way.
		if r.end > r.start || r.err != nil {
			if line, ok := r.split(r.err != nil); ok {
				return line, true
			}
			if r.err != nil {
				r.start, r.end = 0, 0
				return nil, false
			}
		}
		// Make room: move the unsplit bytes to the front when the space
		// after them is gone or they have drifted past the middle, and
		// grow a full buffer up to the limit.
		if r.start > 0 && (r.end == len(r.buf) || r.start > len(r.buf)/2) {
			copy(r.buf, r.buf[r.start:r.end])
			r.end -= r.start
			r.start = 0
		}
		if r.end == len(r.buf) {
			if len(r.buf) >= r.max {
				r.err = errTooLong
				return nil, false
			}
			size := min(max(2*len(r.buf), initialBuffer), r.max)
			buf := make([]byte, size)
			copy(buf, r.buf[r.start:r.end])
			r.buf = buf
			r.end -= r.start
			r.start = 0
		}
		for empty := 0; ; {
			n, err := r.src.Read(r.buf[r.end:])
			if n < 0 || len(r.buf)-r.end < n {
				r.err = bufio.ErrBadReadCount
				break
			}
			r.end += n
			if err != nil {
				r.err = err
				break
			}
			if n > 0 {
				break
			}
			if empty++; empty > maxEmptyReads {
				r.err = io.ErrNoProgress
				break
			}
		}
	}
}

// split takes the first line off buf[start:end]; false when the bytes
// there do not yet decide where it ends. atEOF says no more bytes come.
func (r *Reader) split(atEOF bool) ([]byte, bool) {
	data := r.buf[r.start:r.end]
	if atEOF && len(data) == 0 {
		return nil, false
	}
	i := lineEnd(data[r.scanned:])
	if i < 0 {
		if atEOF {
			r.scanned, r.start = 0, r.end
			return data, true
		}
		r.scanned = len(data)
		return nil, false
	}
	i += r.scanned
	next := i + 1 // the line's end is one byte, or CRLF's two
	if data[i] == '\r' {
		if i+1 == len(data) && !atEOF {
			r.scanned = i // a CR at the end: wait to see whether LF follows
			return nil, false
		}
		if i+1 < len(data) && data[i+1] == '\n' {
			next = i + 2
		}
	}
	r.scanned = 0
	r.start += next
	return data[:i], true
}

// lineEnd is the index of the first CR or LF in b, -1 when none. It looks
// with vectorised byte searches, which beat bytes.IndexAny's byte-at-a-time
// set lookup on the usual line of a few hundred bytes, a window at a time,
// so that lines ending in a lone CR are not each searched to a distant LF.
func lineEnd(b []byte) int {
	const window = 1 << 10
	for off := 0; off < len(b); off += window {
		w := b[off:min(off+window, len(b))]
		lf := bytes.IndexByte(w, '\n')
		if lf >= 0 {
			w = w[:lf]
		}
		if cr := bytes.IndexByte(w, '\r'); cr >= 0 {
			return off + cr
		}
		if lf >= 0 {
			return off + lf
		}
	}
	return -1
}

// IdleReader calls onIdle when no Read returns data for d, so a half-open
// connection that sends nothing cannot hang a chat forever. onIdle
// typically cancels the request's context, which makes the pending Read
// fail.
//
// A Read that returns data only notes when it did: resetting the timer on
// every read (a few a streamed answer, on every stream at once) cost a
// lock and the timer heap's reordering each time. The timer fires d after
// it was last set and looks at that note: when data came since, it is set
// again for d after the data, so onIdle runs d after the last data, as
// before.
type IdleReader struct {
	r      io.Reader
	d      time.Duration
	onIdle func()
	start  time.Time
	// last is when a Read last returned data, as time since start (0: not yet).
	last atomic.Int64

	mu      sync.Mutex // orders Stop with the timer setting itself again
	stopped bool
	timer   *time.Timer
}

// WatchIdle starts watching r; call Stop when done with it.
func WatchIdle(r io.Reader, d time.Duration, onIdle func()) *IdleReader {
	ir := &IdleReader{r: r, d: d, onIdle: onIdle, start: time.Now()}
	ir.mu.Lock()
	ir.timer = time.AfterFunc(d, ir.check)
	ir.mu.Unlock()
	return ir
}

// Read reads from the underlying reader, restarting the clock on data.
func (ir *IdleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.last.Store(int64(time.Since(ir.start)))
	}
	return n, err
}

// check runs when the timer fires: onIdle after d without data, or the
// timer set again for d after the last data. A stopped watch does neither.
func (ir *IdleReader) check() {
	ir.mu.Lock()
	if ir.stopped {
		ir.mu.Unlock()
		return
	}
	if quiet := time.Since(ir.start) - time.Duration(ir.last.Load()); quiet < ir.d {
		ir.timer.Reset(ir.d - quiet)
		ir.mu.Unlock()
		return
	}
	ir.mu.Unlock()
	ir.onIdle()
}

// Stop stops the watch.
func (ir *IdleReader) Stop() {
	ir.mu.Lock()
	defer ir.mu.Unlock()
	ir.stopped = true
	ir.timer.Stop()
}
