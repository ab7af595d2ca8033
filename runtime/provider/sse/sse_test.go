package sse

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// read collects every event of raw, or one byte per Read when oneByte.
func read(raw []byte, stopAt string, oneByte bool) (evs []Event, stopped bool, err error) {
	var r io.Reader = bytes.NewReader(raw)
	if oneByte {
		r = iotest.OneByteReader(r)
	}
	rd := NewReader(r, 1<<20)
	if stopAt != "" {
		rd.StopAt(stopAt)
	}
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return evs, rd.Stopped(), nil
		}
		if err != nil {
			return evs, rd.Stopped(), err
		}
		evs = append(evs, Event{Name: ev.Name, Data: bytes.Clone(ev.Data)})
	}
}

func ev(name, data string) Event { return Event{Name: name, Data: []byte(data)} }

func TestFraming(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		stopAt  string
		want    []Event
		stopped bool
	}{
		{"lf", "data: a\n\ndata: b\n\n", "", []Event{ev("", "a"), ev("", "b")}, false},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", "", []Event{ev("", "a"), ev("", "b")}, false},
		{"lone cr", "data: a\r\rdata: b\r\r", "", []Event{ev("", "a"), ev("", "b")}, false},
		{"no space after colon", "data:a\n\n", "", []Event{ev("", "a")}, false},
		{"only one space dropped", "data:  a\n\n", "", []Event{ev("", " a")}, false},
		{"bom", "\xEF\xBB\xBFdata: a\n\n", "", []Event{ev("", "a")}, false},
		{"comments and unknown fields", ": ping\n\nid: 7\nretry: 100\ndata: a\n\n", "", []Event{ev("", "a")}, false},
		{"named events (Anthropic)", "event: message_start\ndata: {}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n", "",
			[]Event{ev("message_start", "{}"), ev("ping", `{"type": "ping"}`)}, false},
		{"name without data is dropped", "event: x\n\ndata: a\n\n", "", []Event{ev("", "a")}, false},
		{"multi-line data joins", "data: {\"a\":\ndata: 1}\n\n", "", []Event{ev("", "{\"a\":\n1}")}, false},
		{"open event at EOF", "data: a\n\ndata: b", "", []Event{ev("", "a"), ev("", "b")}, false},
		{"field without colon", "data\n\n", "", []Event{ev("", "")}, false},
		{"blank lines only", "\n\n\r\n", "", nil, false},
		{"terminator ends at once", "data: a\n\ndata: [DONE]\ndata: never\n\n", "[DONE]", []Event{ev("", "a")}, true},
		{"terminator closes an open event", "data: a\ndata: [DONE]", "[DONE]", []Event{ev("", "a")}, true},
		{"terminator only as a whole value", "data: [DONE] \n\n", "[DONE]", []Event{ev("", "[DONE] ")}, false},
		{"no terminator set", "data: [DONE]\n\n", "", []Event{ev("", "[DONE]")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, oneByte := range []bool{false, true} {
				got, stopped, err := read([]byte(tt.raw), tt.stopAt, oneByte)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.EqualFunc(got, tt.want, func(a, b Event) bool { return a.Name == b.Name && bytes.Equal(a.Data, b.Data) }) || stopped != tt.stopped {
					t.Fatalf("oneByte=%v: events %q stopped %v, want %q stopped %v", oneByte, got, stopped, tt.want, tt.stopped)
				}
			}
		})
	}
}

func TestLineTooLong(t *testing.T) {
	rd := NewReader(strings.NewReader("data: "+strings.Repeat("y", 2<<20)+"\n\n"), 1<<20)
	if _, err := rd.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("err %v", err)
	}
}

func TestReadErrorDropsOpenEvent(t *testing.T) {
	boom := errors.New("connection reset")
	rd := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: half"), iotest.ErrReader(boom)), 1<<20)
	if e, err := rd.Next(); err != nil || string(e.Data) != "a" {
		t.Fatalf("first event %q, %v", e.Data, err)
	}
	if e, err := rd.Next(); !errors.Is(err, boom) {
		t.Fatalf("got %q, %v; want the read error and no half event", e.Data, err)
	}
}

func TestIdleReader(t *testing.T) {
	pr, pw := io.Pipe()
	fired := make(chan struct{})
	ir := WatchIdle(pr, 20*time.Millisecond, func() { close(fired); pw.CloseWithError(errors.New("idle")) })
	defer ir.Stop()
	if _, err := io.ReadAll(ir); err == nil || err.Error() != "idle" {
		t.Fatalf("err %v", err)
	}
	<-fired
}

// TestIdleReaderAfterData: data that keeps coming keeps the watch quiet
// over many idle periods (the timer, set once, sets itself again after
// each data), and silence after the last data fires it, never sooner than
// d after that data.
func TestIdleReaderAfterData(t *testing.T) {
	const d = 250 * time.Millisecond
	pr, pw := io.Pipe()
	fired := make(chan time.Time, 1)
	ir := WatchIdle(pr, d, func() { fired <- time.Now(); pw.CloseWithError(errors.New("idle")) })
	defer ir.Stop()
	lastWrite := make(chan time.Time, 1)
	go func() {
		var at time.Time
		for end := time.Now().Add(4 * d); time.Now().Before(end); {
			if _, err := pw.Write([]byte("data: x\n\n")); err != nil {
				lastWrite <- time.Time{} // cut while data still came
				return
			}
			at = time.Now()
			time.Sleep(d / 25) // pacing the data, not waiting for anything
		}
		lastWrite <- at
	}()
	readErr := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := ir.Read(buf); err != nil {
				readErr <- err
				return
			}
		}
	}()
	last := <-lastWrite // bounded: the writer stops after 4d, or when cut
	if last.IsZero() {
		t.Fatal("the watch fired while data still came")
	}
	var at time.Time
	select {
	case at = <-fired:
	case <-time.After(10 * time.Second):
		pw.Close()
		t.Fatal("no data for 10 s, and the watch did not fire")
	}
	if err := <-readErr; err.Error() != "idle" {
		t.Fatalf("read error %v, want idle", err)
	}
	if quiet := at.Sub(last); quiet < d {
		t.Fatalf("fired %v after the last data, want at least %v", quiet, d)
	}
}

// FuzzReader: arbitrary bytes never panic, and reading one byte at a time
// gives exactly the events of reading whole.
func FuzzReader(f *testing.F) {
	f.Add([]byte("data: a\n\ndata: b\r\n\r\ndata: [DONE]\n\n"), true)
	f.Add([]byte("event: message_start\ndata: {}\r\r: c\r\rdata:x\r"), false)
	f.Add([]byte("\xEF\xBB\xBFdata\n\ndata: [DONE]"), true)
	f.Fuzz(func(t *testing.T, raw []byte, stop bool) {
		stopAt := ""
		if stop {
			stopAt = "[DONE]"
		}
		whole, ws, werr := read(raw, stopAt, false)
		bytewise, bs, berr := read(raw, stopAt, true)
		if !slices.EqualFunc(whole, bytewise, func(a, b Event) bool { return a.Name == b.Name && bytes.Equal(a.Data, b.Data) }) ||
			ws != bs || (werr == nil) != (berr == nil) {
			t.Fatalf("byte by byte differs:\n%q %v %v\n%q %v %v", whole, ws, werr, bytewise, bs, berr)
		}
	})
}
