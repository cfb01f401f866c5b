package pick

import (
	"fmt"
	"slices"
	"testing"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, in string
		want     []string
	}{
		{"snake case", "get_current_weather", []string{"get", "current", "weather"}},
		{"kebab and dots", "fs-read.file", []string{"fs", "read", "file"}},
		{"camel case", "getWeatherForecast", []string{"get", "weather", "forecast"}},
		{"upper run", "HTMLParser", []string{"html", "parser"}},
		{"digit then upper", "get2Weather", []string{"get2", "weather"}},
		{"digits in a name", "getPM2.5Level", []string{"get", "pm2", "5", "level"}},
		{"stop words dropped, stems", "What is the weather in the cities?", []string{"weather", "citi"}},
		{"stems meet", "running runs", []string{"run", "run"}},
		{"non ascii letters", "Zürich Wetter", []string{"zürich", "wetter"}},
		{"only punctuation", " -_. ", nil},
		{"contractions dropped", "I'm sure it's the user’s, don't", []string{"sure", "user"}},
		{"an apostrophe inside a word", "rock'n'roll O'Brien", []string{"rock", "n", "roll", "o", "brien"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := tokens(c.in); !slices.Equal(got, c.want) {
				t.Errorf("tokens(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func FuzzTokens(f *testing.F) {
	for _, s := range []string{"getWeather", "HTMLParser", "\xff\xfe", "ÀÉÎ", "a_b-c.d", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range tokens(s) {
			if tok == "" {
				t.Fatalf("empty token from %q", s)
			}
		}
	})
}

// A request's words are numbered by sentence: a sentence ends at '.', '?', '!' or ';'
// before a space or the end, and at a line break; "3.5" does not end one, and "e.g. "
// does (an abbreviation is not told from an end).
func TestSplitSentences(t *testing.T) {
	t.Parallel()
	var got []string
	splitSentences("Convert 3.5 kg, e.g. to lb. Then mail it!\nThanks; bye", func(w []byte, n int) {
		got = append(got, fmt.Sprintf("%s/%d", w, n))
	})
	want := []string{"convert/0", "3/0", "5/0", "kg/0", "e/0", "g/0", "to/1", "lb/1", "then/2", "mail/2", "it/2", "thanks/3", "bye/4"}
	if !slices.Equal(got, want) {
		t.Fatalf("splitSentences = %q, want %q", got, want)
	}
}
