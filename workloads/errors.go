package workloads

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error classes recorded with failed operations. They group errors by what they say about the cluster.
const (
	ErrCanceled        = "canceled"          // the caller gave up (the run is ending); not counted
	ErrDeadline        = "deadline"          // no answer within the request timeout
	ErrNoLeader        = "no_leader"         // the member has no leader (election, partition)
	ErrLeaderChanged   = "leader_changed"    // a proposal was dropped by a leader change
	ErrTimeout         = "server_timeout"    // etcd gave up on the request (apply or commit too slow)
	ErrStopped         = "stopped"           // the member is shutting down
	ErrUnavailable     = "unavailable"       // cannot connect, connection lost
	ErrCompacted       = "compacted"         // the requested revision has been compacted
	ErrFutureRev       = "future_rev"        // the requested revision is not yet written
	ErrTooManyRequests = "too_many_requests" // the member is overloaded (committed-applied gap)
	ErrTooLarge        = "too_large"         // the request exceeds --max-request-bytes
	ErrNoSpace         = "no_space"          // the database quota is exhausted
	ErrLeaseNotFound   = "lease_not_found"   // the lease expired or was revoked
	ErrOther           = "other"
)

// ErrorClass classifies an error returned by etcd's client.
func ErrorClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.Canceled):
		return ErrCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return ErrDeadline
	}
	switch rpctypes.ErrorDesc(err) {
	case rpctypes.ErrNoLeader.Error():
		return ErrNoLeader
	case rpctypes.ErrLeaderChanged.Error():
		return ErrLeaderChanged
	case rpctypes.ErrTimeout.Error(), rpctypes.ErrTimeoutDueToLeaderFail.Error(),
		rpctypes.ErrTimeoutDueToConnectionLost.Error(), rpctypes.ErrTimeoutWaitAppliedIndex.Error():
		return ErrTimeout
	case rpctypes.ErrStopped.Error():
		return ErrStopped
	case rpctypes.ErrCompacted.Error():
		return ErrCompacted
	case rpctypes.ErrFutureRev.Error():
		return ErrFutureRev
	case rpctypes.ErrTooManyRequests.Error():
		return ErrTooManyRequests
	case rpctypes.ErrRequestTooLarge.Error():
		return ErrTooLarge
	case rpctypes.ErrNoSpace.Error():
		return ErrNoSpace
	case rpctypes.ErrLeaseNotFound.Error():
		return ErrLeaseNotFound
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.Canceled:
			return ErrCanceled
		case codes.DeadlineExceeded:
			return ErrDeadline
		case codes.Unavailable:
			return ErrUnavailable
		}
	}
	return ErrOther
}
