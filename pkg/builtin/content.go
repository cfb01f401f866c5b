package builtin

import (
	"encoding/base64"
	"unicode/utf8"
)

// Encodings of file and HTTP bodies in tool outputs.
const (
	EncodingText   = "text"   // the content is UTF-8 text, as is
	EncodingBase64 = "base64" // the content was not UTF-8 and is base64 (standard, padded)
)

// encodeContent returns b as text when it is UTF-8, otherwise as base64. A body cut at a
// size limit may end inside a multi-byte character; that partial character is dropped
// from text rather than turning the whole body into base64.
func encodeContent(b []byte, truncated bool) (content, encoding string) {
	text := b
	if truncated {
		for cut := 0; cut < utf8.UTFMax-1 && len(text) > 0 && !utf8.Valid(text); cut++ {
			text = text[:len(text)-1]
		}
	}
	if utf8.Valid(text) {
		return string(text), EncodingText
	}
	return base64.StdEncoding.EncodeToString(b), EncodingBase64
}
