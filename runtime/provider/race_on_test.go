//go:build race

package provider

// The race detector changes what allocates (its sync.Pools keep little).
const raceEnabled = true
