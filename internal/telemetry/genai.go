package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys of the OpenTelemetry GenAI semantic conventions (as named in semconv
// v1.41.0, kept here so that no version of the semconv package is pinned for them).
const (
	KeyOperationName    = attribute.Key("gen_ai.operation.name")
	KeyProviderName     = attribute.Key("gen_ai.provider.name")
	KeyRequestModel     = attribute.Key("gen_ai.request.model")
	KeyAgentName        = attribute.Key("gen_ai.agent.name")
	KeyConversationID   = attribute.Key("gen_ai.conversation.id")
	KeyToolName         = attribute.Key("gen_ai.tool.name")
	KeyToolCallID       = attribute.Key("gen_ai.tool.call.id")
	KeyToolType         = attribute.Key("gen_ai.tool.type")
	KeyToolCallArgs     = attribute.Key("gen_ai.tool.call.arguments")
	KeyToolCallResult   = attribute.Key("gen_ai.tool.call.result")
	KeyUsageInputTokens = attribute.Key("gen_ai.usage.input_tokens")
	KeyUsageOutput      = attribute.Key("gen_ai.usage.output_tokens")
	KeyErrorType        = attribute.Key("error.type")
	keyServiceName      = attribute.Key("service.name")
)

// KeyToolNoSchemaMode is toolfleet's attribute of an execute_tool span whose call was not
// validated against a schema: the tool's noSchemaMode ("read-only", "human-approval",
// "full").
const KeyToolNoSchemaMode = attribute.Key("toolfleet.tool.no_schema_mode")

// Operation names.
const (
	OpInvokeAgent = "invoke_agent"
	OpChat        = "chat"
	OpExecuteTool = "execute_tool"
)

func serviceName(s string) attribute.KeyValue { return keyServiceName.String(s) }

// StartRun starts the span of an agent run, "invoke_agent {agent}", with the run id as
// the conversation id.
func StartRun(ctx context.Context, agent, runID string) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return start(ctx, OpInvokeAgent+" "+agent, trace.SpanKindInternal,
		KeyOperationName.String(OpInvokeAgent), KeyAgentName.String(agent), KeyConversationID.String(runID))
}

// StartChat starts the span of one model call, "chat {model}".
func StartChat(ctx context.Context, provider, model string) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return start(ctx, OpChat+" "+model, trace.SpanKindClient,
		KeyOperationName.String(OpChat), KeyProviderName.String(provider), KeyRequestModel.String(model))
}

// StartTool starts the span of one tool execution, "execute_tool {tool}"; args are
// recorded only when content capture is on.
func StartTool(ctx context.Context, tool, callID string, args []byte) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, trace.SpanFromContext(ctx)
	}
	attrs := []attribute.KeyValue{KeyOperationName.String(OpExecuteTool), KeyToolName.String(tool),
		KeyToolCallID.String(callID), KeyToolType.String("function")}
	if CaptureContent() && args != nil {
		attrs = append(attrs, KeyToolCallArgs.String(string(args)))
	}
	return start(ctx, OpExecuteTool+" "+tool, trace.SpanKindInternal, attrs...)
}

// RecordResult adds a tool's result to its span when content capture is on.
func RecordResult(span trace.Span, result []byte) {
	if Enabled() && CaptureContent() && span.IsRecording() {
		span.SetAttributes(KeyToolCallResult.String(string(result)))
	}
}

// RecordUsage adds a model call's token counts to its span.
func RecordUsage(span trace.Span, input, output int) {
	if Enabled() && span.IsRecording() {
		span.SetAttributes(KeyUsageInputTokens.Int(input), KeyUsageOutput.Int(output))
	}
}

// End ends span; errorType, when set (an error code such as "timeout"), marks it failed
// with error.type as the conventions ask.
func End(span trace.Span, errorType, message string) {
	if !Enabled() || !span.IsRecording() {
		return
	}
	if errorType != "" {
		span.SetAttributes(KeyErrorType.String(errorType))
		span.SetStatus(codes.Error, message)
	}
	span.End()
}
