//go:build !unix

package rewrite

// stackLimit is unknown here: the guard assumes the common 8 MiB.
func stackLimit() uint64 { return 0 }
