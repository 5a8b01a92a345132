//go:build !linux

package main

// stopWithParent: only Linux can signal a process when its parent dies.
func stopWithParent() {}
