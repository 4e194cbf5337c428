package checkpoints_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/checkpoints"
	"github.com/drmas-dev/drmas/storage"
)

// cutBucket is a real store whose reads of one key break off mid-body, as a reset
// connection does.
type cutBucket struct {
	storage.Bucket
	suffix string
}

type cutReader struct{ io.ReadCloser }

func (cutReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func (b cutBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := b.Bucket.Get(ctx, key)
	if err == nil && strings.HasSuffix(key, b.suffix) {
		return cutReader{rc}, nil
	}
	return rc, err
}

// A connection that breaks while LATEST's manifest is read is the store failing, not a damaged
// step: Load returns the error instead of silently falling back to an older step.
func TestLoadDoesNotFallBackWhenTheManifestReadBreaks(t *testing.T) {
	ctx := context.Background()
	b := store(t)
	for step := int64(0); step < 2; step++ {
		if _, err := checkpoints.Publish(ctx, b, "r", newSet(t, step, uint64(step)), "digest"); err != nil {
			t.Fatal(err)
		}
	}
	var warned []string
	s, err := checkpoints.Load(ctx, cutBucket{b, "step=000001/_MANIFEST.json"}, "r", false, func(m string) { warned = append(warned, m) })
	if err == nil {
		t.Fatalf("loaded step %d (warnings %q) while step 1's manifest could not be read", s.Step, warned)
	}
	if !strings.Contains(err.Error(), "step=000001/_MANIFEST.json") {
		t.Errorf("error %q does not name the key", err)
	}
}
