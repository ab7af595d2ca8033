package openai

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// TestStreamTextPieces: the pieces given to emit, kept by the caller, are
// still the ones sent once the stream is read (they are views of one
// buffer that grows, and the plain ones were read as views of the event),
// the answer is all of them in order, and a piece emit refused is not in
// it.
func TestStreamTextPieces(t *testing.T) {
	var pieces []string
	for i := range 300 {
		switch i % 4 {
		case 0:
			pieces = append(pieces, fmt.Sprintf("plain %d ", i))
		case 1:
			pieces = append(pieces, fmt.Sprintf("line %d\nwith \"quotes\" ", i)) // escaped
		case 2:
			pieces = append(pieces, strings.Repeat("long ", i)) // grows the buffer
		case 3:
			pieces = append(pieces, fmt.Sprintf("ünïcödé %d ", i))
		}
	}
	var body bytes.Buffer
	for i, p := range pieces {
		field := "content"
		if i%7 == 6 {
			field = "refusal"
		}
		fmt.Fprintf(&body, "data: {\"choices\":[{\"index\":0,\"delta\":{%q:%s},\"finish_reason\":null}]}\n\n", field, strconv.Quote(p))
	}
	body.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	for _, refuseAt := range []int{-1, 0, 1, 150, len(pieces) - 1} {
		var got []string
		emit := func(d provider.Delta) error {
			if len(got) == refuseAt {
				return errors.New("refused")
			}
			got = append(got, d.Text)
			return nil
		}
		var s stream
		// Small reads, so that the reader's buffer is overwritten under
		// the pieces read before.
		err := s.read(&smallReads{r: bytes.NewReader(body.Bytes()), n: 100}, emit)
		want := pieces
		if refuseAt >= 0 {
			want = pieces[:refuseAt]
			var ee *provider.EmitError
			if !errors.As(err, &ee) {
				t.Fatalf("refused at %d: err %v", refuseAt, err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("refused at %d: %d pieces emitted, want %d", refuseAt, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("refused at %d: piece %d is %q once the stream was read, want %q", refuseAt, i, got[i], want[i])
			}
		}
		if text := s.result().Text; text != strings.Join(want, "") {
			t.Fatalf("refused at %d: the answer is %d bytes, want the %d of the pieces", refuseAt, len(text), len(strings.Join(want, "")))
		}
	}
}

// smallReads reads r at most n bytes at a time.
type smallReads struct {
	r interface{ Read([]byte) (int, error) }
	n int
}

func (s *smallReads) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), s.n)]) }

// TestShortAnswerKeepsNoBuffer: a short answer is a string of its size,
// not a view of the buffer its pieces were given in (which the chat's
// history would keep); a usual one is that view.
func TestShortAnswerKeepsNoBuffer(t *testing.T) {
	for _, tc := range []struct {
		pieces []string
		view   bool
	}{
		{[]string{"OK"}, false},
		{[]string{"Sure", ", ", "done."}, false},
		{[]string{strings.Repeat("words ", 50), strings.Repeat("more ", 20)}, true},
	} {
		var s stream
		for _, p := range tc.pieces {
			s.keep(p)
			s.textN = len(s.text)
		}
		text := s.answer()
		if text != strings.Join(tc.pieces, "") {
			t.Fatalf("answer %q", text)
		}
		if view := unsafe.StringData(text) == &s.text[0]; view != tc.view {
			t.Fatalf("%d bytes in a buffer of %d: a view %v, want %v", len(text), cap(s.text), view, tc.view)
		}
	}
}
