package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// versionCmd prints the module version dpproxy was built as (a tag for
// "go install ...@vX.Y.Z", "(devel)" for a build in a checkout), the VCS
// revision and time when the build recorded them, and the Go version.
func versionCmd(out io.Writer) error {
	fmt.Fprintln(out, versionLine(debug.ReadBuildInfo()))
	return nil
}

func versionLine(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "dpproxy (no build information) " + runtime.Version()
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	line := "dpproxy " + version
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev != "" {
		line += fmt.Sprintf(" (revision %s", rev)
		if at != "" {
			line += " of " + at
		}
		line += modified + ")"
	}
	goVersion := bi.GoVersion
	if goVersion == "" {
		goVersion = runtime.Version()
	}
	return line + " " + goVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
}
