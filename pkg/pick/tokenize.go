package pick

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// tokens returns the analysed terms of text, in order, repeats kept: the text is split
// into words at every character that is not a letter or a digit (so `_`, `-`, `.` and
// spaces all separate), camelCase is split (getWeather → get weather, HTMLParser → html
// parser), case is folded, English stop words are dropped and the rest stemmed with the
// Snowball English stemmer (weathers, weathering → weather). Query and tools go through
// the same analysis, so their terms meet.
func tokens(text string) []string {
	var out []string
	splitWords(text, func(w []byte) {
		if t, ok := analyseWord(w); ok {
			out = append(out, t)
		}
	})
	return out
}

// splitWords calls emit with every lower-cased word of text (the slice is reused after
// emit returns): maximal runs of letters and
// digits, cut again at camelCase boundaries. Cutting before an upper-case letter that
// follows a lower-case letter or a digit splits getWeather and get2Weather; cutting
// before the last capital of a run that is followed by a lower-case letter splits
// HTMLParser into HTML and Parser. An English contraction or possessive ending (I'm,
// don't, user's, we'll) is dropped rather than left as a word of one or two letters that
// matches any tool whose text has it (H&M, for "I'm").
func splitWords(text string, emit func([]byte)) {
	splitSentences(text, func(w []byte, _ int) { emit(w) })
}

// splitSentences is splitWords that also numbers the sentence of each word: a sentence
// ends at '.', '?', '!' or ';' followed by a space or the end, and at a line break.
func splitSentences(text string, emit func(w []byte, sentence int)) {
	var buf [64]byte
	word := buf[:0]
	sentence, words := 0, 0 // words: in this sentence so far
	flush := func() {
		if len(word) > 0 {
			emit(word, sentence)
			word = word[:0]
			words++
		}
	}
	var prev rune = -1 // previous rune of the current word, -1 at a word start
	for i := 0; i < len(text); {
		r, size := rune(text[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(text[i:])
		}
		i += size
		if !isWordRune(r) {
			if (r == '\'' || r == '’') && prev >= 0 && isLetter(prev) {
				i += contraction(text[i:])
			}
			flush()
			end := r == '\n'
			if r == '.' || r == '?' || r == '!' || r == ';' {
				end = i == len(text) || text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r'
			}
			if end && words > 0 {
				sentence, words = sentence+1, 0
			}
			prev = -1
			continue
		}
		if prev >= 0 && isUpper(r) {
			if isLower(prev) || isDigit(prev) {
				flush()
			} else if isUpper(prev) && i < len(text) {
				next, _ := utf8.DecodeRuneInString(text[i:])
				if isLower(next) {
					flush()
				}
			}
		}
		if r < utf8.RuneSelf { // ASCII, most text: no table lookups
			c := byte(r)
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			word = append(word, c)
		} else {
			word = utf8.AppendRune(word, unicode.ToLower(r))
		}
		prev = r
	}
	flush()
}

// contraction returns the length of the English contraction or possessive ending that
// rest starts with (after an apostrophe: s, m, d, ll, re, ve, t, then no more letters
// or digits), or 0.
func contraction(rest string) int {
	n := 0
	for n < len(rest) && n < 3 && ('a' <= rest[n]|0x20 && rest[n]|0x20 <= 'z') {
		n++
	}
	if n == 0 || n < len(rest) && isWordRune(rune(rest[n])) {
		return 0
	}
	switch strings.ToLower(rest[:n]) {
	case "s", "m", "d", "ll", "re", "ve", "t":
		return n
	}
	return 0
}

func isLetter(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
	}
	return unicode.IsLetter(r)
}

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isUpper(r rune) bool {
	if r < utf8.RuneSelf {
		return 'A' <= r && r <= 'Z'
	}
	return unicode.IsUpper(r)
}

func isLower(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z'
	}
	return unicode.IsLower(r)
}

func isDigit(r rune) bool {
	if r < utf8.RuneSelf {
		return '0' <= r && r <= '9'
	}
	return unicode.IsDigit(r)
}

// stemCache remembers the stems of words seen, because the Snowball stemmer allocates and
// costs about a microsecond a word, and queries repeat the catalog's vocabulary. A plain
// map under a read lock lets a lookup by a []byte word run without allocating. It stops
// growing at stemCacheMax entries so that hostile input cannot make it unbounded.
var stemCache = struct {
	sync.RWMutex
	m map[string]string // word → stem ("" for a stop word)
}{m: map[string]string{}}

const stemCacheMax = 1 << 18

// analyseWord turns one lower-cased word into its term, or reports false for a stop word.
func analyseWord(w []byte) (string, bool) {
	stemCache.RLock()
	s, ok := stemCache.m[string(w)]
	stemCache.RUnlock()
	if ok {
		return s, s != ""
	}
	word := string(w)
	if !english.IsStopWord(word) {
		s = english.Stem(word, true)
		if s == "" {
			s = word
		}
		s = strings.Clone(s)
	}
	stemCache.Lock()
	if len(stemCache.m) < stemCacheMax {
		stemCache.m[word] = s
	}
	stemCache.Unlock()
	return s, s != ""
}
