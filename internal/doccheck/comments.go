package doccheck

import (
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

var (
	// issueRE finds the word issue followed by a number, or a hash and a number.
	issueRE = regexp.MustCompile(`(?i)\bissues?\s+#?[0-9]+\b|#[0-9]+\b`)
	// standards are the names that legitimately precede a hash and a number (UAX #15).
	standards = map[string]bool{"UAX": true, "UTS": true, "UTR": true, "RFC": true, "PEP": true, "TR": true}
)

// Issues returns the issue citations in a comment's text: the word issue (or issues) and a
// number, or a hash and a number that is neither part of a word nor after a standard's name.
func Issues(text string) []string {
	var out []string
	for _, loc := range issueRE.FindAllStringIndex(text, -1) {
		m := text[loc[0]:loc[1]]
		if m[0] == '#' {
			before := text[:loc[0]]
			if r, _ := utf8.DecodeLastRuneInString(before); unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("_./-", r) {
				continue // part of a word or a path: C#5, a#1
			}
			fields := strings.Fields(before)
			if len(fields) > 0 && standards[strings.Trim(fields[len(fields)-1], "(")] {
				continue
			}
		}
		out = append(out, m)
	}
	return out
}

// CommentIssue is an issue citation in a Go file's comment.
type CommentIssue struct {
	Pos   token.Position
	Match string
}

// GoCommentIssues parses a Go source file and returns the issue citations in its comments.
func GoCommentIssues(path string, src []byte) ([]CommentIssue, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []CommentIssue
	for _, group := range f.Comments {
		for _, c := range group.List {
			for i, line := range strings.Split(c.Text, "\n") {
				for _, m := range Issues(line) {
					pos := fset.Position(c.Slash)
					pos.Line += i
					out = append(out, CommentIssue{pos, m})
				}
			}
		}
	}
	return out, nil
}
