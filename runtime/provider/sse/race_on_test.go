//go:build race

package sse

// The race detector changes what allocates (its sync.Pools keep little).
const raceEnabled = true
