package syncer

import (
	"context"
	"errors"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNotClaimed is returned for a write to management attempted without the shard claim.
var ErrNotClaimed = errors.New("shard claim not held: write to management refused")

// WriteGate says whether writes to management may pass. The shard claim opens it and closes it
// the moment the claim is lost, so an in-flight reconcile cannot write after that.
type WriteGate struct{ open atomic.Bool }

// Open lets writes pass.
func (g *WriteGate) Open() { g.open.Store(true) }

// Close refuses writes from now on.
func (g *WriteGate) Close() { g.open.Store(false) }

// IsOpen reports whether writes pass.
func (g *WriteGate) IsOpen() bool { return g.open.Load() }

func (g *WriteGate) check() error {
	if !g.open.Load() {
		return ErrNotClaimed
	}
	return nil
}

// gatedClient is a management client whose writes pass only through an open gate.
type gatedClient struct {
	client.Client
	gate *WriteGate
}

func (c *gatedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.gate.check(); err != nil {
		return err
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c *gatedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.gate.check(); err != nil {
		return err
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c *gatedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.gate.check(); err != nil {
		return err
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *gatedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := c.gate.check(); err != nil {
		return err
	}
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *gatedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := c.gate.check(); err != nil {
		return err
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *gatedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if err := c.gate.check(); err != nil {
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
	gate *WriteGate
}

func (s *gatedSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	if err := s.gate.check(); err != nil {
		return err
	}
	return s.SubResourceClient.Create(ctx, obj, sub, opts...)
}

func (s *gatedSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := s.gate.check(); err != nil {
		return err
	}
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s *gatedSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.gate.check(); err != nil {
		return err
	}
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

func (s *gatedSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if err := s.gate.check(); err != nil {
		return err
	}
	return s.SubResourceClient.Apply(ctx, obj, opts...)
}
