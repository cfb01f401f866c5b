package provider

// What a chat template adds to the text of a request, in tokens, at most: counted by
// InputTokensBound on top of the text's bytes.
const (
	// tokensPerRequest: the reply's priming (OpenAI's "<|im_start|>assistant", 3 tokens)
	// and the system text's delimiters.
	tokensPerRequest = 16
	// tokensPerMessage: a message's role and delimiters (OpenAI counts 3 or 4; Llama 3's
	// header is 4 plus the end of turn).
	tokensPerMessage = 8
	// tokensPerTool: what a provider writes around a tool's definition (OpenAI renders
	// each function as a TypeScript type: its name, a comment, "type ... = (_: {" and
	// the closing lines).
	tokensPerTool = 16
	// tokensWithTools: the instructions a provider adds once when tools are offered
	// (Anthropic's tool-use system prompt: 264 to 530 tokens by model and tool choice,
	// per its documentation).
	tokensWithTools = 600
)

// InputTokensBound returns an upper bound of the input tokens req costs on any model
// this package speaks to: one token per byte of the text the model reads (the system
// text; each message's text, its calls' ids, names and arguments, its results' ids,
// names and content; each tool's name, description and parameters), plus what a chat
// template adds around it (a few tokens per request, message and tool, and the
// instructions a provider adds once when tools are offered).
//
// One token per byte is a bound for the tokenizers in use: the byte-level BPE of
// OpenAI (cl100k, o200k), Anthropic, Llama 3 and Mistral (tekken), and SentencePiece
// with byte fallback (Llama 2, Gemma), have every byte among their tokens and merge
// only, so each token stands for at least one byte of the text; English runs about 4
// bytes a token, so the bound is about 4 times the real count. A JSON string's escapes
// and quotes count too, though the model reads its text. The scripted model counts
// words, fewer still. Summing lengths costs no allocation: the planner asks it before
// each model call of a run with a budget.
func InputTokensBound(req Request) int {
	n := tokensPerRequest + len(req.System)
	for _, m := range req.Messages {
		n += tokensPerMessage + len(m.Role) + len(m.Text)
		for _, c := range m.ToolCalls {
			n += len(c.ID) + len(c.Name) + len(c.Arguments)
		}
		for _, r := range m.ToolResults {
			n += len(r.CallID) + len(r.Name) + len(r.Content)
		}
	}
	if len(req.Tools) > 0 {
		n += tokensWithTools
	}
	for _, d := range req.Tools {
		n += tokensPerTool + len(d.Name) + len(d.Description) + len(d.Parameters)
	}
	return n
}
