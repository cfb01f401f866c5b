package pick

import (
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
