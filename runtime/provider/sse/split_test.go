package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// chunkReader hands raw over in reads of the sizes in chunks (cycled; 0
// is a read that returns nothing), then returns end.
type chunkReader struct {
	raw    []byte
	chunks []int
	i      int
	end    error
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.raw) == 0 {
		return 0, c.end
	}
	n := min(c.chunks[c.i%len(c.chunks)], len(p), len(c.raw))
	c.i++
	copy(p, c.raw[:n])
	c.raw = c.raw[n:]
	return n, nil
}

// outcome is what a reader made of a stream: each call of Next, a few
// past the first error or EOF (what a caller that keeps asking sees).
type outcome []string

func run(next func() (Event, error), stopped func() bool) outcome {
	var out outcome
	for ends := 0; ends < 3 && len(out) < 10000; {
		ev, err := next()
		if err != nil {
			ends++
			out = append(out, fmt.Sprintf("err %v (too long: %v) stopped %v", err, errors.Is(err, ErrLineTooLong), stopped()))
			continue
		}
		out = append(out, fmt.Sprintf("event %q %q", ev.Name, ev.Data))
	}
	return out
}

// compare reads raw with the reader and with the scanner-based reference,
// in the same reads, and reports where they differ.
func compare(t *testing.T, raw []byte, maxLine int, chunks []int, end error, stopAt string) {
	t.Helper()
	src := func() io.Reader { return &chunkReader{raw: raw, chunks: chunks, end: end} }
	rd, ref := NewReader(src(), maxLine), newRefReader(src(), maxLine)
	defer rd.Release()
	if stopAt != "" {
		rd.StopAt(stopAt)
		ref.StopAt(stopAt)
	}
	got, want := run(rd.Next, rd.Stopped), run(ref.Next, ref.Stopped)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("raw %q max %d reads %v end %v:\n got %q\nwant %q", raw, maxLine, chunks, end, got, want)
	}
}

// TestSplitLikeScanner: the reader's own line splitter finds the lines
// bufio.Scanner found, in any reads: lines and CRLF split across reads, a
// CR at the end of a read, lines just within and just over the limit
// (ending in LF, CRLF, CR or the stream's end), read errors mid-line and
// reads that return nothing.
func TestSplitLikeScanner(t *testing.T) {
	boom := errors.New("connection reset")
	inputs := []string{
		"data: a\n\ndata: b\n\n",
		"data: a\r\n\r\ndata: b\r\n\r\n",
		"data: a\r\rdata: b\r\r",
		"data: a\r\n\rdata: b\n\r\n",
		"\xEF\xBB\xBFdata: a\n\n",
		"event: x\ndata: 1\ndata: 2\n\n: ping\n\ndata: [DONE]\ndata: after\n\n",
		"data: tail without end",
		"data: tail with cr\r",
		"data: [DONE]",
		"\r\n\r\n\n\r",
		"",
	}
	for n := 1; n <= 24; n++ {
		line := "data: " + strings.Repeat("x", n)
		for _, end := range []string{"\n", "\r\n", "\r", ""} {
			inputs = append(inputs, line+end+"\n", line+end+"data: next\n\n", line+end)
		}
	}
	for _, raw := range inputs {
		for _, maxLine := range []int{8, 9, 10, 16, 17, 18, 29, 30, 31, 1 << 20} {
			for _, chunks := range [][]int{{1 << 20}, {1}, {2}, {3, 0, 5}, {7}, {0, 1}} {
				for _, end := range []error{io.EOF, boom} {
					for _, stopAt := range []string{"", "[DONE]"} {
						compare(t, []byte(raw), maxLine, chunks, end, stopAt)
					}
				}
			}
		}
	}
}

// TestLongLineLimit: a line up to the limit is read whole, in reads of
// the HTTP client's 4 KiB; one byte more gives the error the reader always
// gave ("sse: line too long: longer than 1 MiB").
func TestLongLineLimit(t *testing.T) {
	const maxLine = 1 << 20
	value := strings.Repeat("y", maxLine-len("data: \n"))
	for _, tt := range []struct {
		value string
		err   string
	}{
		{value, ""},
		{value + "y", "sse: line too long: longer than 1 MiB"},
	} {
		rd := NewReader(&chunkReader{raw: []byte("data: " + tt.value + "\n\n"), chunks: []int{4 << 10}, end: io.EOF}, maxLine)
		ev, err := rd.Next()
		if tt.err == "" && (err != nil || string(ev.Data) != tt.value) {
			t.Errorf("line of %d bytes: %d bytes of data, %v", len(tt.value), len(ev.Data), err)
		}
		if tt.err != "" && (err == nil || err.Error() != tt.err || !errors.Is(err, ErrLineTooLong)) {
			t.Errorf("line of %d bytes: %v, want %q", len(tt.value), err, tt.err)
		}
		rd.Release()
	}
}

// TestReleasedReaderStartsAfresh: a reader from the pool keeps nothing of
// the stream its buffers last served (open event, name, terminator, BOM
// state), and a grown buffer is not kept.
func TestReleasedReaderStartsAfresh(t *testing.T) {
	for range 20 {
		rd := NewReader(strings.NewReader("event: old\ndata: "+strings.Repeat("z", 100<<10)+"\ndata: [DONE]\n"), 1<<20)
		rd.StopAt("[DONE]")
		if ev, err := rd.Next(); err != nil || ev.Name != "old" {
			t.Fatalf("%q, %v", ev.Name, err)
		}
		rd.Release()
		if cap(rd.buf) > maxPooled || cap(rd.data) > maxPooled {
			t.Fatalf("released reader keeps %d and %d bytes", cap(rd.buf), cap(rd.data))
		}
		rd = NewReader(strings.NewReader("\xEF\xBB\xBFdata: [DONE]\n\ndata: new\n\n"), 1<<20)
		ev, err := rd.Next()
		if err != nil || ev.Name != "" || string(ev.Data) != "[DONE]" || rd.Stopped() {
			t.Fatalf("fresh reader: %q %q %v stopped %v", ev.Name, ev.Data, err, rd.Stopped())
		}
		rd.Release()
	}
}

// TestReaderAllocations: a stream read by a reader from the pool
// allocates nothing of its own.
func TestReaderAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's pools keep little")
	}
	var raw bytes.Buffer
	for i := range 24 {
		fmt.Fprintf(&raw, "data: {\"choices\":[{\"delta\":{\"content\":\"piece %d\"}}]}\n\n", i)
	}
	raw.WriteString("data: [DONE]\n\n")
	src := bytes.NewReader(raw.Bytes())
	n := testing.AllocsPerRun(50, func() {
		src.Reset(raw.Bytes())
		rd := NewReader(src, 16<<20)
		rd.StopAt("[DONE]")
		for {
			if _, err := rd.Next(); err != nil {
				break
			}
		}
		rd.Release()
	})
	// StopAt's []byte conversion of the terminator.
	if n > 1 {
		t.Errorf("%v allocations per stream", n)
	}
}

// FuzzSplitLikeScanner: on arbitrary bytes, limits and reads the reader
// gives what the scanner-based reference gave.
func FuzzSplitLikeScanner(f *testing.F) {
	f.Add([]byte("data: a\r\n\r\ndata: [DONE]\r"), uint8(12), uint8(3), true, false)
	f.Add([]byte("event: e\rdata:x\r\r\ndata: long line\n"), uint8(9), uint8(1), false, true)
	f.Fuzz(func(t *testing.T, raw []byte, maxLine, chunk uint8, stop, fail bool) {
		stopAt, end := "", error(io.EOF)
		if stop {
			stopAt = "[DONE]"
		}
		if fail {
			end = errors.New("reset")
		}
		compare(t, raw, int(maxLine)+1, []int{int(chunk%16) + 1, int(chunk / 16)}, end, stopAt)
	})
}

// TestLineEnd: the first CR or LF, wherever the two fall.
func TestLineEnd(t *testing.T) {
	for _, s := range []string{"", "abc", "a\nb", "a\rb", "a\r\nb", "a\n\rb", "\n", "\r", "abc\r", strings.Repeat("x", 100) + "\r" + strings.Repeat("y", 50) + "\n",
		strings.Repeat("x", 1023) + "\r", strings.Repeat("x", 1024) + "\r", strings.Repeat("x", 1024) + "\n\r", strings.Repeat("x", 3000) + "\r\n",
		strings.Repeat("x", 1020) + "\n" + strings.Repeat("y", 10) + "\r"} {
		if got, want := lineEnd([]byte(s)), strings.IndexAny(s, "\r\n"); got != want {
			t.Errorf("lineEnd(%q) = %d, want %d", s, got, want)
		}
	}
}
