package reliability_test

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSecretsNeverPrinted runs `drmas config show` and a stage against an S3 endpoint where
// nothing listens, with the secret key in AWS_SECRET_ACCESS_KEY: the secret must appear in
// neither stdout nor stderr, and the stage must fail within 15 s naming the endpoint.
func TestSecretsNeverPrinted(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-value"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := l.Addr().String()
	l.Close() // a closed port: connections are refused

	env := []string{
		"AWS_ACCESS_KEY_ID=AKIDEXAMPLE",
		"AWS_SECRET_ACCESS_KEY=" + secret,
		"DRMAS_S3_ENDPOINT=" + endpoint,
		"DRMAS_S3_INSECURE=true",
	}
	// s3://b/p is rejected before any connection (a bucket name is at least 3 characters);
	// s3://drmas-bkt/p goes through the connection attempts until s3store's connect timeout.
	for _, c := range []struct {
		store string
		args  []string
	}{
		{"s3://b/p", []string{"config", "show"}},
		{"s3://b/p", []string{"config", "show", "--format", "json"}},
		{"s3://b/p", []string{"run-stage", "rollout", "--iter", "0"}},
		{"s3://b/p", []string{"run"}},
		{"s3://drmas-bkt/p", []string{"config", "show"}},
		{"s3://drmas-bkt/p", []string{"run-stage", "rollout", "--iter", "0"}},
	} {
		args := c.args
		name := c.store + " " + strings.Join(args, " ")
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			full := append([]string{"--config", cfgPath, "--store", c.store, "-q"}, args...)
			cmd := exec.CommandContext(ctx, binary(t), full...)
			cmd.Env = cleanEnv(env...)
			var stdout, stderr lockedWriter
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			took := time.Since(start)
			out := stdout.String() + stderr.String()
			if strings.Contains(out, secret) {
				t.Fatalf("the secret appears in the output:\n%s", out)
			}
			if args[0] == "config" {
				if err != nil {
					t.Fatalf("config show: %v\n%s", err, out)
				}
				if !strings.Contains(out, endpoint) {
					t.Errorf("config show does not show the endpoint %s:\n%s", endpoint, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s succeeded against a closed port:\n%s", name, out)
			}
			if took > 15*time.Second {
				t.Errorf("%s took %v to fail, want < 15 s", name, took)
			}
			if !strings.Contains(stderr.String(), endpoint) {
				t.Errorf("the error does not name the endpoint %s:\n%s", endpoint, stderr.String())
			}
			t.Logf("failed after %v: %s", took.Round(time.Millisecond), strings.TrimSpace(stderr.String()))
		})
	}
}
