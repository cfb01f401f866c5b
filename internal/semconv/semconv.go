// Package semconv names what toolfleet's spans record: the instrumentation scope, the
// operation names and the attribute keys of the OpenTelemetry GenAI semantic conventions
// (as named in semconv v1.41.0), and toolfleet's own attributes. It holds names only —
// no tracer, no switch, no behaviour — so that the executor (a public package), the
// planner and their tests spell every name once. It is internal because the names are
// the conventions' own (README, "Tracing and metrics", lists the ones in use), and
// keeping them here pins no version of the go.opentelemetry.io/otel/semconv packages.
package semconv

import "go.opentelemetry.io/otel/attribute"

// Scope is the instrumentation scope of every span toolfleet makes.
const Scope = "github.com/toolfleet/toolfleet"

// Attribute keys of the GenAI semantic conventions.
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
)

// KeyToolNoSchemaMode is toolfleet's attribute of an execute_tool span whose call was not
// validated against a schema: the tool's noSchemaMode ("read-only", "human-approval",
// "full").
const KeyToolNoSchemaMode = attribute.Key("toolfleet.tool.no_schema_mode")

// Operation names; a span is named "{operation} {agent, model or tool}".
const (
	OpInvokeAgent = "invoke_agent"
	OpChat        = "chat"
	OpExecuteTool = "execute_tool"
)

// ToolTypeFunction is gen_ai.tool.type of every toolfleet tool.
const ToolTypeFunction = "function"
