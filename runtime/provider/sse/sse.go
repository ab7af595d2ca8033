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
	"time"
)

// ErrLineTooLong is returned (wrapped) for a line longer than the reader's
// limit.
var ErrLineTooLong = errors.New("sse: line too long")

// Event is one dispatched event. Data is valid until the next call of Next.
type Event struct {
	// Name is the event field ("" when none was sent).
	Name string
	Data []byte
}

// Reader splits a stream into events. It is not safe for concurrent use.
type Reader struct {
	sc      *bufio.Scanner
	max     int
	stopAt  []byte
	data    []byte
	hasData bool
	name    string
	first   bool
	stopped bool
}

// initialBuffer is the reader's first buffer: the HTTP client hands the
// body over in reads of its own 4 KiB buffer, so more would sit unused.
const initialBuffer = 4 << 10

// NewReader returns a reader of r that accepts lines up to maxLine bytes.
func NewReader(r io.Reader, maxLine int) *Reader {
	sc := bufio.NewScanner(r)
	// Start small: a stream is read per turn, its lines are a few hundred
	// bytes, and the scanner doubles the buffer for a longer one.
	sc.Buffer(make([]byte, 0, min(initialBuffer, maxLine)), maxLine)
	sc.Split(lineSplitter())
	return &Reader{sc: sc, max: maxLine, first: true}
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
	for r.sc.Scan() {
		line := r.sc.Bytes()
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
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Event{}, fmt.Errorf("%w: longer than %d MiB", ErrLineTooLong, r.max>>20)
		}
		return Event{}, err
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

// lineSplitter returns a bufio.SplitFunc for SSE lines ending in LF, CRLF
// or a lone CR. It remembers how far it has already looked, so a long line
// arriving in many small reads is scanned once, not once per read.
func lineSplitter() bufio.SplitFunc {
	scanned := 0
	return func(data []byte, atEOF bool) (int, []byte, error) {
		if atEOF && len(data) == 0 {
			return 0, nil, nil
		}
		if i := bytes.IndexAny(data[scanned:], "\r\n"); i >= 0 {
			i += scanned
			if data[i] == '\n' {
				scanned = 0
				return i + 1, data[:i], nil
			}
			if i+1 < len(data) {
				scanned = 0
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if !atEOF {
				scanned = i // a CR at the end: wait to see whether LF follows
				return 0, nil, nil
			}
			scanned = 0
			return i + 1, data[:i], nil
		}
		if atEOF {
			scanned = 0
			return len(data), data, nil
		}
		scanned = len(data)
		return 0, nil, nil
	}
}

// IdleReader calls onIdle when no Read returns data for d, so a half-open
// connection that sends nothing cannot hang a chat forever. onIdle
// typically cancels the request's context, which makes the pending Read
// fail.
type IdleReader struct {
	r     io.Reader
	d     time.Duration
	timer *time.Timer
}

// WatchIdle starts watching r; call Stop when done with it.
func WatchIdle(r io.Reader, d time.Duration, onIdle func()) *IdleReader {
	return &IdleReader{r: r, d: d, timer: time.AfterFunc(d, onIdle)}
}

// Read reads from the underlying reader, restarting the clock on data.
func (ir *IdleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.timer.Reset(ir.d)
	}
	return n, err
}

// Stop stops the watch.
func (ir *IdleReader) Stop() { ir.timer.Stop() }
