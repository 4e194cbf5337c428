package report_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/drmas-dev/drmas/ablate"
	"github.com/drmas-dev/drmas/analysis"
	"github.com/drmas-dev/drmas/analysis/analysistest"
	"github.com/drmas-dev/drmas/report"
	"github.com/drmas-dev/drmas/storage/filestore"
)

func TestMain(m *testing.M) {
	code := m.Run()
	analysistest.Cleanup()
	os.Exit(code)
}

// page is what the test checks in the HTML.
type page struct {
	imgs, tables, figures int
	title                 string
	pngs                  [][]byte
	hasBody, hasHead      bool
}

func parse(t *testing.T, data []byte) page {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var p page
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "img":
				p.imgs++
				for _, a := range n.Attr {
					if a.Key == "src" {
						b64, ok := strings.CutPrefix(a.Val, "data:image/png;base64,")
						if !ok {
							t.Errorf("img src %.40q is not an inline PNG", a.Val)
							continue
						}
						png, err := base64.StdEncoding.DecodeString(b64)
						if err != nil {
							t.Errorf("img: %v", err)
						}
						p.pngs = append(p.pngs, png)
					}
				}
			case "table":
				p.tables++
			case "figure":
				p.figures++
			case "title":
				if n.FirstChild != nil {
					p.title = n.FirstChild.Data
				}
			case "body":
				p.hasBody = true
			case "head":
				p.hasHead = true
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	// Well-formed enough: the tokenizer sees balanced figure/table/tr tags and no error but EOF.
	z := html.NewTokenizer(bytes.NewReader(data))
	depth := map[string]int{}
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			if z.Err().Error() != "EOF" {
				t.Fatalf("tokenize: %v", z.Err())
			}
			break
		}
		name, _ := z.TagName()
		switch tt {
		case html.StartTagToken:
			depth[string(name)]++
		case html.EndTagToken:
			depth[string(name)]--
		}
	}
	for _, tag := range []string{"html", "head", "body", "table", "tr", "figure", "ul", "h1", "h2", "h3", "p"} {
		if depth[tag] != 0 {
			t.Errorf("<%s> opened and closed unevenly (%+d)", tag, depth[tag])
		}
	}
	return p
}

func TestReportHTML(t *testing.T) {
	ctx := context.Background()
	env, _ := analysistest.Env(t)
	b := env.Bucket
	cache := t.TempDir()
	openSession := func() *analysis.Session {
		s, err := analysis.Open(ctx, analysis.Options{Bucket: b, Run: analysistest.Run, CacheDir: cache})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}

	// The run alone: grad norm, reward, avg@k/pass@k, one histogram per agent, inflation; tables:
	// rewards, grad norms, evaluation, condition.
	s := openSession()
	var buf bytes.Buffer
	t0 := time.Now()
	if _, err := report.Generate(ctx, s, report.Options{}, &buf); err != nil {
		t.Fatal(err)
	}
	t.Logf("report without ablation: %d bytes in %s", buf.Len(), time.Since(t0))
	p := parse(t, buf.Bytes())
	if p.imgs != 6 || len(p.pngs) != 6 || p.figures != 6 || p.tables != 4 || !p.hasBody || !p.hasHead || p.title != "drmas run src" {
		t.Fatalf("page: %d imgs, %d pngs, %d figures, %d tables, title %q", p.imgs, len(p.pngs), p.figures, p.tables, p.title)
	}
	for i, png := range p.pngs {
		if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 2000 {
			t.Errorf("image %d: not a plausible PNG (%d bytes)", i, len(png))
		}
	}
	if strings.Contains(buf.String(), "src=\"http") || strings.Contains(buf.String(), "<script") {
		t.Error("report references external resources")
	}

	// Asking for an ablation that does not exist says so.
	if _, err := report.Build(ctx, s, report.Options{Ablation: "replay"}); err == nil || !strings.Contains(err.Error(), "no committed replay ablation summary yet") {
		t.Fatalf("missing ablation: %v", err)
	}

	// With a replay ablation (2 estimators, evaluated): + one grad-norm plot per agent and the
	// whole model, + avg@k/pass@k per estimator, + two predicted-vs-measured plots, + two tables.
	r, _ := ablate.ParseRange("1..2")
	if _, err := ablate.Run(ctx, env, ablate.Options{Estimators: []string{"drmas", "grpo"}, Iterations: r, Eval: true}); err != nil {
		t.Fatal(err)
	}
	s = openSession()
	buf.Reset()
	rep, err := report.Generate(ctx, s, report.Options{Ablation: "replay", Title: "ablation <test> & co"}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	p = parse(t, buf.Bytes())
	if p.imgs != 6+3+1+2 || p.tables != 6 || p.title != "ablation <test> & co" {
		var names []string
		for _, f := range rep.Figures {
			names = append(names, f.Name)
		}
		t.Fatalf("with ablation: %d imgs (%v), %d tables, title %q", p.imgs, names, p.tables, p.title)
	}
	if !strings.Contains(buf.String(), "ablation &lt;test&gt; &amp; co") {
		t.Error("title not escaped")
	}
	abl := rep.Tables[len(rep.Tables)-2]
	if len(abl.Rows) != 2*3 || abl.Rows[0][0] != "whole model" || abl.Rows[0][9] == "–" {
		t.Errorf("ablation table: %v", abl.Rows)
	}
	if err := os.WriteFile(t.TempDir()+"/report.html", buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("report with ablation: %d bytes, %d figures", buf.Len(), len(rep.Figures))
}

func TestReportEmptyRun(t *testing.T) {
	ctx := context.Background()
	b, _ := filestore.New(t.TempDir())
	defer b.Close()
	s, err := analysis.Open(ctx, analysis.Options{Bucket: b, Run: "empty", CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var buf bytes.Buffer
	rep, err := report.Generate(ctx, s, report.Options{}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	p := parse(t, buf.Bytes())
	if p.imgs != 0 || len(rep.Notes) != 3 || !strings.Contains(buf.String(), "no committed learn metrics yet") {
		t.Errorf("empty run: %d imgs, notes %v", p.imgs, rep.Notes)
	}
}
