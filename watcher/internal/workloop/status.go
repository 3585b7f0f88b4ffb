package workloop

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// FieldManager is the field manager of every status write of the signing controllers.
const FieldManager = "signet-watcher"

// WriteResult is what became of a status write.
type WriteResult int

const (
	// Written: the status is stored.
	Written WriteResult = iota
	// Superseded: after a conflict, the object read again no longer needs the write.
	Superseded
	// Gone: the object was deleted or replaced by another with the same name.
	Gone
	// Rejected: the API server refused the write as invalid, and the controller drops the
	// object (StatusTarget.Invalid decides).
	Rejected
	// NotWritten: the write failed; the error says why and the object is re-queued.
	NotWritten
)

// StatusTarget is one object whose status a controller writes, and how to reach it. T is
// the controller's view of the object.
type StatusTarget[T any] struct {
	// Kind names the object in logs, e.g. "CSR"; Key names it in errors, e.g. its
	// namespace/name.
	Kind, Key string
	// UID returns an object's UID.
	UID func(T) types.UID
	// Update writes obj with its status changed by the decided change (on a copy), with
	// UpdateStatus and FieldManager. It returns the API error, wrapped or not.
	Update func(ctx context.Context, obj T) error
	// Get reads the object again from the API server.
	Get func(ctx context.Context) (T, error)
	// Superseded returns why fresh, the object read again after a conflict, must not get
	// the write decided for old, or "" if it must.
	Superseded func(old, fresh T) string
	// Invalid, if set, handles an Invalid (422) answer for obj; without it an Invalid answer
	// is an error like any other (NotWritten).
	Invalid func(ctx context.Context, obj T, err error) (WriteResult, error)
}

// WriteStatus writes obj (the cached object, with its resourceVersion) through t.Update. A
// deleted object is dropped (Gone). On Conflict it reads the object again (t.Get) and decides
// at once:
//   - deleted, or another object with the same name (UID changed): dropped (Gone);
//   - t.Superseded gives a reason (no longer to be signed, or a different spec): dropped
//     (Superseded);
//   - otherwise the write is made once more on the fresh object. What it writes was decided
//     for this UID and spec, so the signing server is not asked again.
//
// An Invalid answer goes to t.Invalid when set. Any other error, and a second conflict, is
// returned (NotWritten) and the object re-queued. Each write is conditional on the
// resourceVersion that was checked, so a status is never overwritten by a stale decision.
func WriteStatus[T any](ctx context.Context, obj T, t StatusTarget[T]) (WriteResult, error) {
	logger := klog.FromContext(ctx)
	err := t.Update(ctx, obj)
	switch {
	case err == nil:
		return Written, nil
	case apierrors.IsNotFound(err):
		logger.Info("Dropping "+t.Kind, "why", "deleted before its status was written")
		return Gone, nil
	case apierrors.IsInvalid(err) && t.Invalid != nil:
		return t.Invalid(ctx, obj, err)
	case !apierrors.IsConflict(err):
		logger.Error(err, "Writing "+t.Kind+" status")
		return NotWritten, err
	}

	logger.V(2).Info("Status write conflicted, reading the "+t.Kind+" again", "err", err)
	fresh, err := t.Get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		logger.Info("Dropping "+t.Kind, "why", "deleted before its status was written")
		return Gone, nil
	case err != nil:
		logger.Error(err, "Reading "+t.Kind+" after a status conflict")
		return NotWritten, fmt.Errorf("reading %s %s after a status conflict: %w", t.Kind, t.Key, err)
	case t.UID(fresh) != t.UID(obj):
		logger.Info("Dropping "+t.Kind, "why", "replaced by another object with the same name", "newUID", t.UID(fresh))
		return Gone, nil
	}
	if why := t.Superseded(obj, fresh); why != "" {
		logger.Info("Dropping "+t.Kind+" after a status conflict", "why", why)
		return Superseded, nil
	}
	err = t.Update(ctx, fresh)
	switch {
	case err == nil:
		logger.V(2).Info("Status written after a conflict")
		return Written, nil
	case apierrors.IsNotFound(err):
		logger.Info("Dropping "+t.Kind, "why", "deleted before its status was written")
		return Gone, nil
	case apierrors.IsInvalid(err) && t.Invalid != nil:
		return t.Invalid(ctx, fresh, err)
	default:
		logger.Error(err, "Writing "+t.Kind+" status after a conflict, will retry")
		return NotWritten, err
	}
}
