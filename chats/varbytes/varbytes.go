// Package varbytes writes and reads the length-prefixed fields of Mirror's
// replicated log entries (the people registry's, chats/people, and the
// Telegram bot state's, gateway/telegram): a uvarint length, then that
// many bytes. The reader is strict, since entries come from the network:
// a length must be minimally encoded and fit in what is left.
package varbytes

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Append appends b with its length before it.
func Append(out, b []byte) []byte {
	out = binary.AppendUvarint(out, uint64(len(b)))
	return append(out, b...)
}

// Uvarint reads a minimally encoded uvarint and returns what follows it.
func Uvarint(b []byte) (uint64, []byte, error) {
	x, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, errors.New("truncated or overlong length")
	}
	if n != len(binary.AppendUvarint(nil, x)) {
		return 0, nil, errors.New("a length not minimally encoded")
	}
	return x, b[n:], nil
}

// Bytes reads a field Append wrote and returns it (its capacity cut to
// its length, so appending to it never writes over what follows) and
// what follows it.
func Bytes(b []byte) ([]byte, []byte, error) {
	l, rest, err := Uvarint(b)
	if err != nil {
		return nil, nil, err
	}
	if l > uint64(len(rest)) {
		return nil, nil, fmt.Errorf("a length of %d past the end (%d bytes left)", l, len(rest))
	}
	return rest[:l:l], rest[l:], nil
}
