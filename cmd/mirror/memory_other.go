//go:build !linux

package main

// pageOut is a no-op where MADV_PAGEOUT does not exist.
func pageOut(string) {}
