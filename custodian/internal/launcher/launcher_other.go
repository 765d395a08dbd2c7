//go:build !linux

package launcher

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
)

var errLinux = errors.New("launcher: contained runs need Linux (network namespaces, Landlock, seccomp)")

// Network is Linux-only; see network_linux.go.
type Network struct {
	Name       string
	Prefix     netip.Prefix
	Mediator   netip.Addr
	Child      netip.Addr
	ResolvConf string
}

// Child is Linux-only.
type Child struct{}

// NewNetwork fails: Linux only.
func NewNetwork() (*Network, error) { return nil, errLinux }

// TempDir fails: Linux only.
func TempDir() (string, error) { return "", errLinux }

// Sweep fails: Linux only.
func Sweep() ([]string, error) { return nil, errLinux }

// MaybeChild returns at once: no child is ever started here.
func MaybeChild() {}

func (n *Network) Close() error                           { return nil }
func (n *Network) ListenTCP(int) (net.Listener, error)    { return nil, errLinux }
func (n *Network) ListenUDP(int) (net.PacketConn, error)  { return nil, errLinux }
func (n *Network) CatchTCP(int) (net.Listener, error)     { return nil, errLinux }
func (n *Network) Start(Spec) (*Child, error)             { return nil, errLinux }
func (n *Network) Run(context.Context, Spec) (int, error) { return -1, errLinux }
func (c *Child) Pid() int                                 { return 0 }
func (c *Child) Signal(os.Signal) error                   { return errLinux }
func (c *Child) Wait() (int, error)                       { return -1, errLinux }
