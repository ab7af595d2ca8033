//go:build !unix

package clustertest

import "testing"

// reserve reserves nothing where flock does not exist: the port is taken
// as drawn.
func reserve(testing.TB, int) bool { return true }
