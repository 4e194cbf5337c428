package storage

import (
	"context"
	"io"
	"sync/atomic"
)

// Metrics is a point-in-time copy of a MetricsBucket's counters.
type Metrics struct {
	Gets, GetRanges, Puts, Stats, Deletes, Iters int64 // calls, successful or not
	Errors                                       int64 // calls that failed (NotFound included) and Get/GetRange bodies whose read failed
	BytesRead                                    int64 // bytes delivered by Get and GetRange readers
	BytesWritten                                 int64 // bytes of successful Puts
}

// MetricsBucket counts the operations and bytes that pass through it. It is safe for
// concurrent use; the counters are cumulative since WithMetrics.
type MetricsBucket struct {
	b Bucket

	gets, getRanges, puts, stats, deletes, iters atomic.Int64
	errors                                       atomic.Int64
	bytesRead, bytesWritten                      atomic.Int64
}

var _ Bucket = (*MetricsBucket)(nil)

// WithMetrics wraps b with operation and byte counters.
func WithMetrics(b Bucket) *MetricsBucket { return &MetricsBucket{b: b} }

// Snapshot returns the current counter values.
func (m *MetricsBucket) Snapshot() Metrics {
	return Metrics{
		Gets:         m.gets.Load(),
		GetRanges:    m.getRanges.Load(),
		Puts:         m.puts.Load(),
		Stats:        m.stats.Load(),
		Deletes:      m.deletes.Load(),
		Iters:        m.iters.Load(),
		Errors:       m.errors.Load(),
		BytesRead:    m.bytesRead.Load(),
		BytesWritten: m.bytesWritten.Load(),
	}
}

// Unwrap returns the wrapped bucket.
func (m *MetricsBucket) Unwrap() Bucket { return m.b }

func (m *MetricsBucket) count(err error) {
	if err != nil {
		m.errors.Add(1)
	}
}

func (m *MetricsBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	m.gets.Add(1)
	rc, err := m.b.Get(ctx, key)
	m.count(err)
	if err != nil {
		return nil, err
	}
	return &countingReadCloser{rc: rc, n: &m.bytesRead, errs: &m.errors}, nil
}

func (m *MetricsBucket) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	m.getRanges.Add(1)
	rc, err := m.b.GetRange(ctx, key, off, length)
	m.count(err)
	if err != nil {
		return nil, err
	}
	return &countingReadCloser{rc: rc, n: &m.bytesRead, errs: &m.errors}, nil
}

func (m *MetricsBucket) Put(ctx context.Context, key string, r io.Reader, size int64, opts ...PutOption) error {
	m.puts.Add(1)
	if size >= 0 {
		// Pass r through untouched: providers use io.Seeker / io.ReaderAt for retries
		// and parallel uploads, which a counting wrapper would hide.
		err := m.b.Put(ctx, key, r, size, opts...)
		m.count(err)
		if err == nil {
			m.bytesWritten.Add(size)
		}
		return err
	}
	cr := &countingReader{r: r}
	err := m.b.Put(ctx, key, cr, size, opts...)
	m.count(err)
	if err == nil {
		m.bytesWritten.Add(cr.n)
	}
	return err
}

func (m *MetricsBucket) Stat(ctx context.Context, key string) (Attributes, error) {
	m.stats.Add(1)
	a, err := m.b.Stat(ctx, key)
	m.count(err)
	return a, err
}

func (m *MetricsBucket) Delete(ctx context.Context, key string) error {
	m.deletes.Add(1)
	err := m.b.Delete(ctx, key)
	m.count(err)
	return err
}

func (m *MetricsBucket) Iter(ctx context.Context, prefix string, f func(key string) error) error {
	m.iters.Add(1)
	err := m.b.Iter(ctx, prefix, f)
	m.count(err)
	return err
}

func (m *MetricsBucket) Name() string { return m.b.Name() }

func (m *MetricsBucket) Close() error { return m.b.Close() }

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// countingReadCloser counts the bytes read, and a read that fails (a connection cut mid-body)
// as one error of its call.
type countingReadCloser struct {
	rc     io.ReadCloser
	n      *atomic.Int64
	errs   *atomic.Int64
	failed bool
}

func (c *countingReadCloser) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	c.n.Add(int64(n))
	if err != nil && err != io.EOF && !c.failed {
		c.failed = true
		c.errs.Add(1)
	}
	return n, err
}

func (c *countingReadCloser) Close() error { return c.rc.Close() }
