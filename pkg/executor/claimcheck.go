package executor

import (
	"context"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// payloadTimeout bounds storing one output by reference.
const payloadTimeout = 30 * time.Second

// claimCheck stores an output larger than the claim-check threshold as a payload of its
// caller's tenant and puts the reference in the result instead (see jsutil.Payloads). An
// output over the payload limit becomes output_too_large; one that cannot be stored now
// is left in the result, where the result's own size limit decides.
func (ex *Executor) claimCheck(j *job, failure *tools.Error) *tools.Error {
	out := j.res.Output
	// Below the server's limit for a result too, when it is smaller than the stream's.
	if len(out) <= min(ex.cfg.ClaimCheckBytes, ex.resultLimit()/2) {
		return failure
	}
	if int64(len(out)) > ex.cfg.PayloadMaxBytes {
		failure = tools.Errorf(tools.CodeOutputTooLarge, "the output of %q is %d bytes; outputs are kept up to %d bytes (payloadMaxBytes), so it was not kept",
			j.def.Name, len(out), ex.cfg.PayloadMaxBytes)
		j.res.Output, j.res.OutputUTF8Repaired = failure.ForModel(), false
		settle(j, failure)
		return failure
	}
	ctx, cancel := context.WithTimeout(context.Background(), payloadTimeout)
	defer cancel()
	ref, err := ex.payloads.Put(ctx, j.res.Caller.Tenant, out)
	if err != nil {
		ex.o.log.Warn().Err(err).Str("call_id", j.res.CallID).Int("bytes", len(out)).Msg("output not stored by reference")
		return failure
	}
	j.res.Output, j.res.OutputRef = nil, ref
	return failure
}
