package layout_test

import (
	"path"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/layout"
)

func TestRunNames(t *testing.T) {
	for _, ok := range []string{"demo", "a.b-c_d", "R2"} {
		if err := layout.ValidateRunName(ok); err != nil {
			t.Errorf("%q rejected: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "..", "a/b", "a..b", ".x", "-x", "a b", strings.Repeat("x", 129)} {
		if err := layout.ValidateRunName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseIterDir(t *testing.T) {
	for el, want := range map[string]int{"iter=000007": 7, "iter=000000": 0, "iter=1234567": 1234567} {
		if n, ok := layout.ParseIterDir(el); !ok || n != want {
			t.Errorf("ParseIterDir(%q) = %d, %v; want %d", el, n, ok, want)
		}
		if got := path.Base(layout.IterDir("r", want)); got != el {
			t.Errorf("IterDir spells %d as %q, not %q", want, got, el)
		}
	}
	for _, el := range []string{"iter=7", "iter=+000007", "iter=-00001", "iter=", "step=000007", "iter=00000x"} {
		if n, ok := layout.ParseIterDir(el); ok {
			t.Errorf("ParseIterDir(%q) = %d, want not an iteration folder", el, n)
		}
	}
}
