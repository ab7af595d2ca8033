//go:build unix

package clustertest

import "testing"

// TestReserve: a port reserved by one test is refused to another until
// the first ends.
func TestReserve(t *testing.T) {
	const port = 31999
	t.Run("first", func(t *testing.T) {
		if !reserve(t, port) {
			t.Skip("held by a test of another process just now")
		}
		t.Run("second, meanwhile", func(t *testing.T) {
			if reserve(t, port) {
				t.Fatal("a reserved port was reserved again")
			}
		})
	})
	if !reserve(t, port) {
		t.Fatal("the port stayed reserved after its test ended")
	}
}
