package syncer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNotClaimed is returned for a write attempted without the shard claim.
var ErrNotClaimed = errors.New("shard claim not held: write refused")

// ClaimGate says whether the agent may write, to management and to the local cluster. Each claim
// period opens it and releases it the moment the claim is lost, so an in-flight reconcile cannot
// write after that. It counts its holders: the end of one claim period that overlaps the start of
// the next (client-go runs them in goroutines of their own) never closes the gate under the newer
// one. While its verify says management's identity is unverified (connVerifier), writes to
// either cluster are refused too: a copy is never written from what an unverified management
// serves.
type ClaimGate struct {
	holders atomic.Int64
	verify  func(context.Context) error
}

// Open lets writes pass until the returned release is called (by every holder that opened it);
// release may be called any number of times, only the first counts.
func (g *ClaimGate) Open() (release func()) {
	g.holders.Add(1)
	var once sync.Once
	return func() { once.Do(func() { g.holders.Add(-1) }) }
}

// IsOpen reports whether writes pass.
func (g *ClaimGate) IsOpen() bool { return g.holders.Load() > 0 }

func (g *ClaimGate) check(ctx context.Context) error {
	if !g.IsOpen() {
		return ErrNotClaimed
	}
	if g.verify != nil {
		return g.verify(ctx)
	}
	return nil
}

// gatedClient is a client (of management or of the local cluster) whose writes pass only through
// an open gate; its reads are the wrapped client's.
type gatedClient struct {
	client.Client
	gate *ClaimGate
}

func (c *gatedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.gate.check(ctx); err != nil {
		return err
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c *gatedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.gate.check(ctx); err != nil {
		return err
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c *gatedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.gate.check(ctx); err != nil {
		return err
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *gatedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := c.gate.check(ctx); err != nil {
		return err
	}
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *gatedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := c.gate.check(ctx); err != nil {
		return err
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *gatedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if err := c.gate.check(ctx); err != nil {
		return err
	}
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

func (c *gatedClient) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c *gatedClient) SubResource(name string) client.SubResourceClient {
	return &gatedSubResource{SubResourceClient: c.Client.SubResource(name), gate: c.gate}
}

type gatedSubResource struct {
	client.SubResourceClient
	gate *ClaimGate
}

func (s *gatedSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	if err := s.gate.check(ctx); err != nil {
		return err
	}
	return s.SubResourceClient.Create(ctx, obj, sub, opts...)
}

func (s *gatedSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := s.gate.check(ctx); err != nil {
		return err
	}
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s *gatedSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.gate.check(ctx); err != nil {
		return err
	}
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

func (s *gatedSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if err := s.gate.check(ctx); err != nil {
		return err
	}
	return s.SubResourceClient.Apply(ctx, obj, opts...)
}
