package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// refReader is the Reader before it split lines itself (over a
// bufio.Scanner), kept as the reference the new one is held to.
// refReader splits a stream into events. It is not safe for concurrent use.
type refReader struct {
	sc      *bufio.Scanner
	max     int
	stopAt  []byte
	data    []byte
	hasData bool
	name    string
	first   bool
	stopped bool
}

// NewReader returns a reader of r that accepts lines up to maxLine bytes.
func newRefReader(r io.Reader, maxLine int) *refReader {
	sc := bufio.NewScanner(r)
	// Start small: a stream is read per turn, its lines are a few hundred
	// bytes, and the scanner doubles the buffer for a longer one.
	sc.Buffer(make([]byte, 0, min(initialBuffer, maxLine)), maxLine)
	sc.Split(refLineSplitter())
	return &refReader{sc: sc, max: maxLine, first: true}
}

// StopAt makes a data line equal to data end the stream at once, as
// OpenAI's "data: [DONE]" does: whatever event was open is returned first,
// then Next reports io.EOF without reading further, so a server that holds
// the connection open after the terminator cannot hang the reply.
func (r *refReader) StopAt(data string) { r.stopAt = []byte(data) }

// Stopped reports whether the StopAt terminator was seen.
func (r *refReader) Stopped() bool { return r.stopped }

// Next returns the next event, io.EOF at the end of the stream, or the
// read error (ErrLineTooLong wrapped for an over-long line). An event cut
// off by a read error is not returned.
func (r *refReader) Next() (Event, error) {
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
func (r *refReader) take() Event {
	ev := Event{Name: r.name, Data: r.data}
	r.data, r.hasData, r.name = r.data[:0], false, ""
	return ev
}

// lineSplitter returns a bufio.SplitFunc for SSE lines ending in LF, CRLF
// or a lone CR. It remembers how far it has already looked, so a long line
// arriving in many small reads is scanned once, not once per read.
func refLineSplitter() bufio.SplitFunc {
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
