package varbytes

import (
	"bytes"
	"testing"
)

func TestBytes(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want string // the field read; "" with err set when refused
		rest string
		err  bool
	}{
		{"field and rest", Append(nil, []byte("key")), "key", "", false},
		{"empty field", append(Append(nil, nil), 'x'), "", "x", false},
		{"nothing", nil, "", "", true},
		{"length past the end", []byte{5, 'a', 'b'}, "", "", true},
		{"length not minimal", []byte{0x81, 0x00, 'a'}, "", "", true},
		{"truncated length", []byte{0x80}, "", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, rest, err := Bytes(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want error %v", err, tc.err)
			}
			if err == nil && (string(got) != tc.want || string(rest) != tc.rest) {
				t.Fatalf("read %q then %q, want %q then %q", got, rest, tc.want, tc.rest)
			}
		})
	}
}

// FuzzBytes: whatever is read back is a field that writes to the same
// bytes, and a field never reaches past its input.
func FuzzBytes(f *testing.F) {
	f.Add(Append([]byte(nil), []byte("a value")))
	f.Add([]byte{0x81, 0x00})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, in []byte) {
		got, rest, err := Bytes(in)
		if err != nil {
			return
		}
		if again := append(Append(nil, got), rest...); !bytes.Equal(again, in) {
			t.Fatalf("%x read as %q then %x, which writes as %x", in, got, rest, again)
		}
		if cap(got) != len(got) {
			t.Fatalf("a field of %d bytes with room for %d", len(got), cap(got))
		}
	})
}
