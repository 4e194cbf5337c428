// Package doccheck holds the checks of the repository's documentation that CI runs as tests:
// README.md's and docs/'s relative links and images resolve (anchors included), and neither
// they nor the Go comments cite issue numbers or tell work history, which git keeps.
package doccheck

import (
	"regexp"
	"strings"

	"github.com/drmas-dev/drmas/internal/refdocs"
)

// Link is a link or image target found in a Markdown file.
type Link struct {
	Line   int
	Target string
	Image  bool
}

var (
	linkRE  = regexp.MustCompile(`(!?)\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	imgRE   = regexp.MustCompile(`<img[^>]*\ssrc="([^"]+)"`)
	codeRE  = regexp.MustCompile("`[^`]*`")
	fenceRE = regexp.MustCompile("^\\s*(```|~~~)")
)

// Links returns the links and images of a Markdown text, outside code blocks and code spans.
func Links(text string) []Link {
	var out []Link
	inFence := false
	for i, line := range strings.Split(text, "\n") {
		if fenceRE.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		line = codeRE.ReplaceAllString(line, "")
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			out = append(out, Link{Line: i + 1, Target: m[2], Image: m[1] == "!"})
		}
		for _, m := range imgRE.FindAllStringSubmatch(line, -1) {
			out = append(out, Link{Line: i + 1, Target: m[1], Image: true})
		}
	}
	return out
}

// Anchors returns the anchors of a Markdown text's headings, as GitHub makes them (a repeated
// heading gets -1, -2, … appended).
func Anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if fenceRE.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimLeft(line, "#")
		if heading == "" || heading[0] != ' ' {
			continue
		}
		slug := refdocs.Slug(strings.ReplaceAll(heading, "`", ""))
		if n := seen[slug]; n > 0 {
			out[slug+"-"+itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

// External reports whether a link target leaves the repository (a URL or a mail address).
func External(target string) bool {
	return strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:")
}

// historyRE finds issue citations (a hash and a number, or the word issue and a number) and
// work-history phrases.
var historyRE = regexp.MustCompile(`(?i)(?:^|[\s(\[,;])#[0-9]+\b|\bissues?\s+#?[0-9]+\b|\bprevious VM\b|\bthis session\b|\bearlier sessions?\b`)

// History returns the issue citations and work-history phrases of a text, one per match.
func History(text string) []string {
	var out []string
	for _, m := range historyRE.FindAllString(text, -1) {
		out = append(out, strings.TrimSpace(m))
	}
	return out
}
