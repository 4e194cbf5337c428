// Package miniotest runs a real MinIO server as a child process for tests.
//
// Start finds the binary (env DRMAS_MINIO_BIN, else "minio" on PATH, else
// $HOME/.cache/drmas-tools/bin/minio), starts it on free 127.0.0.1 ports with a fresh data
// folder and random root credentials, waits until /minio/health/live answers, logs the
// server version and stops the process when the test ends. Without a binary the test is
// skipped, unless CI=true, where it fails. MinIO is AGPL: it is only ever run as a
// separate process, never imported.
//
// Readiness: GET /minio/health/live answering 200 without the header
// "x-minio-server-status: offline" (which MinIO sets until its object layer is up).
package miniotest

import (
	"bytes"
	"context"
	"crypto/rand"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// MinIOModuleVersion is the pinned MinIO server version the project builds and tests with.
const MinIOModuleVersion = "v0.0.0-20260212201848-7aac2a2c5b7c"

// InstallHint says how to get the binary.
const InstallHint = "GOBIN=$HOME/.cache/drmas-tools/bin go install github.com/minio/minio@" + MinIOModuleVersion +
	" (or set DRMAS_MINIO_BIN to a minio binary)"

// ReadyTimeout bounds how long Start and Restart wait for the server to become live.
const ReadyTimeout = 30 * time.Second

// Server is a running MinIO server.
type Server struct {
	Endpoint  string // "127.0.0.1:port", plain http
	AccessKey string
	SecretKey string
	Dir       string // data folder, kept across Restart

	tb      testing.TB
	bin     string
	console string
	version string

	mu   sync.Mutex
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{} // closed when cmd exits
}

// Binary returns the path of the MinIO binary, or an error saying where it looked.
func Binary() (string, error) {
	if p := os.Getenv("DRMAS_MINIO_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("DRMAS_MINIO_BIN=%s: %w", p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("minio"); err == nil {
		return p, nil
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cache", "drmas-tools", "bin", "minio")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("minio binary not found (DRMAS_MINIO_BIN, PATH, $HOME/.cache/drmas-tools/bin/minio)")
}

// Start starts a MinIO server for the test and registers its shutdown with tb.Cleanup.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("miniotest: %v; install: %s", err, InstallHint)
		}
		tb.Skipf("miniotest: %v; install: %s", err, InstallHint)
	}
	s := &Server{
		AccessKey: "drmas-" + randomHex(4),
		SecretKey: "secret-" + randomHex(16),
		Dir:       tb.TempDir(),
		tb:        tb,
		bin:       bin,
	}
	s.version = binaryVersion(bin)
	tb.Logf("miniotest: %s: %s", bin, s.version)
	tb.Cleanup(s.Stop)

	var lastErr error
	for range 3 { // a free port can be taken between probing and binding: retry
		port, console, err := freePorts()
		if err != nil {
			tb.Fatalf("miniotest: %v", err)
		}
		s.Endpoint = "127.0.0.1:" + port
		s.console = "127.0.0.1:" + console
		if lastErr = s.start(); lastErr == nil {
			return s
		}
		tb.Logf("miniotest: start on %s: %v; retrying on other ports", s.Endpoint, lastErr)
	}
	tb.Fatalf("miniotest: %v", lastErr)
	return nil
}

// Version returns the server's version: the first line of `minio --version` and, when
// the binary carries Go build information, its module version.
func (s *Server) Version() string { return s.version }

// URL returns "http://" + Endpoint.
func (s *Server) URL() string { return "http://" + s.Endpoint }

// Stop kills the server and waits for it to exit. It is safe to call more than once.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart stops the server and starts it again on the same data folder and port, for
// fault tests. It fails the test if the server does not come back.
func (s *Server) Restart() {
	s.tb.Helper()
	s.mu.Lock()
	s.stopLocked()
	s.mu.Unlock()
	var err error
	for range 20 { // the port may linger for a moment after the kill
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.tb.Fatalf("miniotest: restart on %s: %v", s.Endpoint, err)
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	cmd := exec.Command(s.bin, "server", "--quiet",
		"--address", s.Endpoint, "--console-address", s.console, s.Dir)
	cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+s.AccessKey,
		"MINIO_ROOT_PASSWORD="+s.SecretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
	)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.out, s.done = cmd, out, done

	client := &http.Client{Timeout: time.Second}
	live := s.URL() + "/minio/health/live"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, live, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			// Live answers 200 before the object layer is up; until then it sets
			// x-minio-server-status: offline and S3 calls fail "not initialized".
			if resp.StatusCode == http.StatusOK && resp.Header.Get("X-Minio-Server-Status") != "offline" {
				return nil
			}
		}
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("minio exited before becoming live: %s", strings.TrimSpace(out.String()))
		case <-ctx.Done():
			s.stopLocked()
			return fmt.Errorf("minio not live within %v: %s", ReadyTimeout, strings.TrimSpace(out.String()))
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// Client returns a minio-go client for the server with the root credentials.
func (s *Server) Client(tb testing.TB) *minio.Client {
	tb.Helper()
	c, err := minio.New(s.Endpoint, &minio.Options{
		Creds:      credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Region:     "us-east-1",
		MaxRetries: 2,
	})
	if err != nil {
		tb.Fatalf("miniotest: client: %v", err)
	}
	return c
}

var bucketSeq atomic.Int64

var nonBucketChars = regexp.MustCompile(`[^a-z0-9-]+`)

// NewBucket creates a fresh, empty bucket named after the test and returns its name.
func (s *Server) NewBucket(tb testing.TB) string {
	tb.Helper()
	name := strings.Trim(nonBucketChars.ReplaceAllString(strings.ToLower(tb.Name()), "-"), "-")
	suffix := fmt.Sprintf("-%d", bucketSeq.Add(1))
	if max := 63 - len(suffix) - 2; len(name) > max {
		name = name[len(name)-max:]
	}
	name = "t-" + strings.Trim(name, "-") + suffix
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Client(tb).MakeBucket(ctx, name, minio.MakeBucketOptions{}); err != nil {
		tb.Fatalf("miniotest: make bucket %s: %v", name, err)
	}
	return name
}

func freePorts() (string, string, error) {
	var ports []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", "", fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		_, port, _ := net.SplitHostPort(l.Addr().String())
		ports = append(ports, port)
	}
	return ports[0], ports[1], nil
}

func binaryVersion(bin string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	v := strings.TrimSpace(string(out))
	if i := strings.IndexByte(v, '\n'); i >= 0 {
		v = v[:i]
	}
	if err != nil {
		v = fmt.Sprintf("%s (minio --version: %v)", v, err)
	}
	if bi, err := buildinfo.ReadFile(bin); err == nil {
		v += fmt.Sprintf(" (module %s %s, %s)", bi.Main.Path, bi.Main.Version, bi.GoVersion)
	}
	return v
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 { // keep the log bounded
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
