package main

import (
	"fmt"
	"slices"
	"strings"
)

// A run of some sections only (-only, -skip) rewrites the report with
// what it measured and keeps every other section's text from the report
// already there, so that one section can be re-measured alone without
// losing the others. Sections are matched by their heading line; the
// Setup list keeps the old items this run did not describe (the data of
// sections it did not load).

// reportSection is one "## " section of a report: its heading line and
// the lines under it.
type reportSection struct {
	heading string
	body    []string
}

// splitReport returns the text before the first section and the sections.
func splitReport(text string) (pre []string, secs []reportSection) {
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			secs = append(secs, reportSection{heading: line})
		case len(secs) == 0:
			pre = append(pre, line)
		default:
			secs[len(secs)-1].body = append(secs[len(secs)-1].body, line)
		}
	}
	return pre, secs
}

// mergeReport returns fresh with old's sections that fresh lacks, each
// after the section it followed in old. skipped names the sections not
// run, for the note under the title.
func mergeReport(old, fresh string, skipped []string) string {
	if strings.TrimSpace(old) == "" || len(skipped) == 0 {
		return fresh
	}
	oldPre, oldSecs := splitReport(old)
	pre, secs := splitReport(fresh)
	has := func(h string) int {
		return slices.IndexFunc(secs, func(s reportSection) bool { return s.heading == h })
	}
	for i, s := range oldSecs {
		if j := has(s.heading); j >= 0 {
			if s.heading == "## Setup" {
				secs[j].body = mergeSetup(s.body, secs[j].body)
			}
			continue
		}
		at := 0
		for k := i - 1; k >= 0; k-- {
			if j := has(oldSecs[k].heading); j >= 0 {
				at = j + 1
				break
			}
		}
		secs = slices.Insert(secs, at, s)
	}
	var b strings.Builder
	for _, l := range pre {
		b.WriteString(l + "\n")
	}
	if when := runSentence(oldPre); when != "" {
		fmt.Fprintf(&b, "This run did not measure %s: those sections are kept from the earlier run (%s).\n\n", strings.Join(skipped, ", "), when)
	}
	for _, s := range secs {
		b.WriteString(s.heading + "\n")
		for _, l := range s.body {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// runSentence is the "Run on …, took …" sentence of a report's preamble
// (without its load averages), or "".
func runSentence(pre []string) string {
	for _, l := range pre {
		if i := strings.Index(l, "Run on "); i >= 0 {
			s := l[i+len("Run on "):]
			if j := strings.Index(s, ". "); j >= 0 {
				s = s[:j]
			}
			if strings.Contains(s, "took") {
				return "run on " + s
			}
		}
	}
	return ""
}

// mergeSetup keeps fresh's Setup items and adds old's items about things
// fresh does not describe (an item's subject: its text up to the first
// colon, or the second for "Data:" items).
func mergeSetup(old, fresh []string) []string {
	subject := func(l string) string {
		f := strings.SplitN(l, ":", 3)
		if len(f) == 3 && f[0] == "- Data" {
			return f[0] + ":" + f[1]
		}
		return f[0]
	}
	seen := map[string]bool{}
	for _, l := range fresh {
		seen[subject(l)] = true
	}
	out := slices.Clone(fresh)
	for _, l := range old {
		if strings.HasPrefix(l, "- ") && !seen[subject(l)] {
			// Before the trailing blank line of fresh's list, if any.
			at := len(out)
			for at > 0 && strings.TrimSpace(out[at-1]) == "" {
				at--
			}
			out = slices.Insert(out, at, l)
		}
	}
	return out
}
