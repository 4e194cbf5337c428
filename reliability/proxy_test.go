package reliability_test

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultMode is what the proxy does once its byte budget is spent.
type faultMode int

const (
	forward faultMode = iota // pass everything through
	reset                    // reset every connection (RST) and refuse new ones
	stall                    // stop forwarding: connections stay open, nothing moves
)

// proxy is a TCP proxy to a target that counts the bytes it forwards (both directions) and,
// once told to, injects a fault after N more bytes: resetting or stalling connections, and
// optionally calling a hook (to stop the server behind it).
type proxy struct {
	ln     net.Listener
	target string

	moved    atomic.Int64 // bytes forwarded, both directions
	trigger  atomic.Int64 // fault when moved reaches this; < 0: never
	faulted  atomic.Bool  // the fault is active
	mode     atomic.Int32
	onFault  func() // called once, in its own goroutine, when the fault fires
	once     *sync.Once
	hookDone chan struct{} // closed once the armed fault's hook (if any) has returned

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, once: &sync.Once{}, hookDone: make(chan struct{})}
	p.trigger.Store(-1)
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

// Moved is the number of bytes forwarded so far.
func (p *proxy) Moved() int64 { return p.moved.Load() }

// FailAfter arms a fault of the given mode after n more bytes; hook (may be nil) runs once
// when it fires.
func (p *proxy) FailAfter(n int64, mode faultMode, hook func()) {
	p.mu.Lock()
	p.onFault = hook
	p.once = &sync.Once{}
	p.hookDone = make(chan struct{})
	p.mu.Unlock()
	p.mode.Store(int32(mode))
	p.trigger.Store(p.moved.Load() + n)
}

// Fired reports whether the armed fault fired.
func (p *proxy) Fired() bool { return p.faulted.Load() }

// WaitHook waits until the hook of a fault that fired has returned (it runs in its own
// goroutine: a test that restarts the server must not have a late hook stop it again).
func (p *proxy) WaitHook() {
	if !p.Fired() {
		return
	}
	p.mu.Lock()
	done := p.hookDone
	p.mu.Unlock()
	<-done
}

// Heal disarms the fault and drops every connection, so clients reconnect to a working proxy.
func (p *proxy) Heal() {
	p.trigger.Store(-1)
	p.faulted.Store(false)
	p.mode.Store(int32(forward))
	p.dropAll()
}

func (p *proxy) fire() {
	if p.faulted.Swap(true) {
		return
	}
	p.mu.Lock()
	hook, once, done := p.onFault, p.once, p.hookDone
	p.mu.Unlock()
	if faultMode(p.mode.Load()) == reset {
		p.dropAll()
	}
	once.Do(func() {
		go func() {
			defer close(done)
			if hook != nil {
				hook()
			}
		}()
	})
}

func (p *proxy) dropAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close with RST
		}
		c.Close()
		delete(p.conns, c)
	}
}

func (p *proxy) close() {
	p.ln.Close()
	p.dropAll()
	p.wg.Wait()
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.faulted.Load() && faultMode(p.mode.Load()) == reset {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

func (p *proxy) handle(c net.Conn) {
	defer p.wg.Done()
	p.track(c)
	defer p.untrack(c)
	defer c.Close()
	s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		return
	}
	p.track(s)
	defer p.untrack(s)
	defer s.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(s, c); s.Close(); c.Close() }()
	go func() { defer wg.Done(); p.pipe(c, s); s.Close(); c.Close() }()
	wg.Wait()
}

// pipe copies src to dst, counting bytes and applying the fault.
func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 16<<10)
	for {
		n, err := src.Read(buf)
		chunk := buf[:n]
		for len(chunk) > 0 {
			if mode := faultMode(p.mode.Load()); p.faulted.Load() && mode != forward {
				if mode == stall {
					// Hold the connection open without moving a byte until it is dropped.
					_, _ = io.Copy(io.Discard, src)
				}
				return
			}
			k := len(chunk)
			if t := p.trigger.Load(); t >= 0 && !p.faulted.Load() {
				left := t - p.moved.Load()
				if left <= 0 {
					p.fire()
					continue
				}
				if left < int64(k) {
					k = int(left)
				}
			}
			if _, werr := dst.Write(chunk[:k]); werr != nil {
				return
			}
			p.moved.Add(int64(k))
			chunk = chunk[k:]
		}
		if err != nil {
			return // EOF or an error: handle closes both sides
		}
	}
}
