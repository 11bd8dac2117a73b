package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Group: "demo.regionsync.dev", Resource: "tenants"}
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("connect: %w", syscall.ECONNREFUSED)}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"refused dial, wrapped", fmt.Errorf("uploading status of a/b: %w", dial), true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"EOF", fmt.Errorf("watch: %w", io.ErrUnexpectedEOF), true},
		{"deadline", fmt.Errorf("write: %w", context.DeadlineExceeded), true},
		{"canceled", context.Canceled, true},
		{"503", apierrors.NewServiceUnavailable("etcd down"), true},
		{"429", apierrors.NewTooManyRequests("slow down", 1), true},
		{"504", apierrors.NewTimeoutError("took too long", 1), true},
		{"500", apierrors.NewInternalError(errors.New("etcdserver: leader changed")), true},
		{"server timeout", apierrors.NewServerTimeout(gr, "update", 1), true},
		{"conflict", apierrors.NewConflict(gr, "a", errors.New("modified")), false},
		{"forbidden", apierrors.NewForbidden(gr, "a", errors.New("policy")), false},
		{"invalid", apierrors.NewBadRequest("bad"), false},
		{"not found", apierrors.NewNotFound(gr, "a"), false},
		{"a bug", errors.New("nil map"), false},
	}
	for _, tc := range cases {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("%s: Transient(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
