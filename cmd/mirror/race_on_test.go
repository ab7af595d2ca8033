//go:build race

package main

// raceEnabled says this test binary runs under the race detector, which
// makes the gateway several times slower: a test that measures the
// product's speed runs a binary built without it (productBinary).
const raceEnabled = true
