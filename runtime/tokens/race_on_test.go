//go:build race

package tokens

// The race detector slows regular expressions and map lookups about
// tenfold; the property tests then sample less.
const raceEnabled = true
