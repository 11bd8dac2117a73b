package testenv

import (
	"errors"
	"io"
	"net"
	neturl "net/url"
	"sync"

	"k8s.io/client-go/rest"
)

// Proxy is a TCP proxy in front of an API server that a test can take down and bring back on the
// same address: "down" refuses connections and cuts open ones, exactly what an agent sees when
// its management cluster becomes unreachable.
type Proxy struct {
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

// NewProxy reserves a loopback address for a proxy to cfg's API server. It starts down.
func NewProxy(cfg *rest.Config) (*Proxy, error) {
	u, err := url(cfg.Host)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	return &Proxy{target: u, addr: addr, conns: map[net.Conn]struct{}{}}, nil
}

func url(host string) (string, error) {
	u, err := neturl.Parse(host)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return "", errors.New("testenv: proxy needs an https API server address, got " + host)
	}
	return u.Host, nil
}

// Config returns a copy of cfg that talks to the API server through the proxy.
func (p *Proxy) Config(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Host = "https://" + p.addr
	return c
}

// Up starts accepting connections.
func (p *Proxy) Up() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.ln = ln
	go p.serve(ln)
	return nil
}

// Down refuses new connections and cuts every open one.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *Proxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *Proxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // went down meanwhile
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}
