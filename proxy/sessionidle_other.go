//go:build !linux

package proxy

// canAwait: elsewhere than Linux, sessions keep their Backend while idle
// (sessionidle.go).
const canAwait = false

func readable(uintptr) bool { return true }
