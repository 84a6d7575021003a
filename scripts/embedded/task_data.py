"""Seeded generator for the bundled target tasks' data.

Two synthetic corpora, each with a training split (for the tiny model) and an
evaluation split that never overlaps it:

* reviews: short product / film / restaurant reviews with negation, intensifiers
  and mixed cues ("... but ..."), labelled positive / negative / neutral by a
  scoring rule, with a small share of labels flipped to model annotator noise
  (so that no model can be perfect on them);
* addition: two-digit additions ("47 + 15 =" -> "62"); the Qwen2 tokenizer splits
  numbers into single digits, so answers are several tokens long.

Same seed -> same files, byte for byte.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

LABELS = ("positive", "negative", "neutral")

# aspect nouns by domain; every review talks about one domain
ASPECTS = {
    "phone": ["battery", "screen", "camera", "speaker", "case", "charger", "price", "design"],
    "film": ["plot", "acting", "ending", "music", "dialogue", "pacing", "cast", "soundtrack"],
    "restaurant": ["soup", "service", "dessert", "staff", "menu", "portion", "coffee", "pasta"],
    "hotel": ["room", "bed", "breakfast", "location", "view", "shower", "lobby", "wifi"],
    "laptop": ["keyboard", "display", "fan", "trackpad", "battery", "hinge", "sound", "build"],
}
# adjective -> strength (positive numbers are praise)
ADJECTIVES = {
    "excellent": 2, "fantastic": 2, "superb": 2, "wonderful": 2, "amazing": 2,
    "good": 1, "nice": 1, "solid": 1, "pleasant": 1, "decent": 1,
    "okay": 0, "average": 0, "ordinary": 0, "acceptable": 0,
    "poor": -1, "weak": -1, "dull": -1, "flimsy": -1, "slow": -1,
    "terrible": -2, "awful": -2, "horrible": -2, "dreadful": -2, "broken": -2,
}
INTENSIFIERS = {"very": 2.0, "really": 2.0, "extremely": 2.0, "quite": 1.0, "somewhat": 0.5}
NEGATIONS = ["not", "never", "hardly"]
CLOSERS = {
    "i would buy it again .": 2, "highly recommended .": 2, "worth every penny .": 2,
    "i want a refund .": -2, "never again .": -2, "avoid it .": -2,
    "it is what it is .": 0, "nothing special either way .": 0, "hard to say more .": 0,
}
OPENERS = ["honestly ,", "overall ,", "to be fair ,", "well ,", "in short ,", ""]
LABEL_NOISE = 0.04


def _clause(rng: random.Random, domain: str) -> tuple[str, float]:
    aspect = rng.choice(ASPECTS[domain])
    adjective = rng.choice(sorted(ADJECTIVES))
    strength = float(ADJECTIVES[adjective])
    words = ["the", aspect, rng.choice(["was", "is", "felt", "seemed"])]
    roll = rng.random()
    if roll < 0.25:
        # negation halves and flips: "not excellent" is mildly negative, "not bad" mildly positive
        words.append(rng.choice(NEGATIONS))
        strength = -0.5 * strength if strength else -0.5
    elif roll < 0.55:
        intensifier = rng.choice(sorted(INTENSIFIERS))
        words.append(intensifier)
        strength *= INTENSIFIERS[intensifier]
    words.append(adjective)
    return " ".join(words), strength


def make_review(rng: random.Random) -> dict:
    domain = rng.choice(sorted(ASPECTS))
    n_clauses = rng.choice([1, 1, 2, 2, 2, 3])
    parts: list[str] = []
    score = 0.0
    for i in range(n_clauses):
        text, strength = _clause(rng, domain)
        if i == 0:
            parts.append(text)
            score += strength
        elif rng.random() < 0.5:
            # after "but" the second cue dominates
            parts.append("but " + text)
            score = 0.5 * score + 2.0 * strength
        else:
            parts.append("and " + text)
            score += strength
    if rng.random() < 0.35:
        closer = rng.choice(sorted(CLOSERS))
        parts.append(". " + closer)
        score += CLOSERS[closer]
    else:
        parts.append(".")
    opener = rng.choice(OPENERS)
    text = " ".join(([opener] if opener else []) + parts)
    if score >= 1.0:
        label = "positive"
    elif score <= -1.0:
        label = "negative"
    else:
        label = "neutral"
    if rng.random() < LABEL_NOISE:
        label = rng.choice([other for other in LABELS if other != label])
    return {"domain": domain, "text": text, "label": label}


def make_reviews(seed: int, n_train: int, n_test: int) -> tuple[list[dict], list[dict]]:
    """Distinct review texts; the evaluation split shares no text with training."""
    rng = random.Random(seed)
    seen: set[str] = set()
    rows: list[dict] = []
    while len(rows) < n_train + n_test:
        review = make_review(rng)
        if review["text"] in seen:
            continue
        seen.add(review["text"])
        rows.append(review)
    test = rows[:n_test]
    train = rows[n_test:]
    for i, row in enumerate(test):
        row["id"] = f"review-test-{i:05d}"
        row["label_index"] = LABELS.index(row["label"])
    for i, row in enumerate(train):
        row["id"] = f"review-train-{i:05d}"
        row["label_index"] = LABELS.index(row["label"])
    return train, test


def make_additions(seed: int, n_test: int) -> tuple[list[dict], list[dict]]:
    """All 10,000 two-digit additions, split so that evaluation pairs are never trained on."""
    rng = random.Random(seed + 1)
    pairs = [(a, b) for a in range(100) for b in range(100)]
    rng.shuffle(pairs)
    rows = [
        {"a": a, "b": b, "question": f"{a} + {b} =", "answer": str(a + b)}
        for a, b in pairs
    ]
    test, train = rows[:n_test], rows[n_test:]
    for i, row in enumerate(test):
        row["id"] = f"add-test-{i:05d}"
    for i, row in enumerate(train):
        row["id"] = f"add-train-{i:05d}"
    return train, test


def shared_prefix(train_reviews: list[dict], n_shots: int = 6) -> str:
    """The long instruction block plus few-shot examples that every shared-prefix prompt starts with."""
    instruction = (
        "You are a review classifier for an online shop . Read the customer review and answer "
        "with exactly one word : positive , negative or neutral . A review is positive when the "
        "customer praises the product , negative when the customer complains , and neutral when "
        "the praise and the complaints balance out or the customer is indifferent . Words such as "
        "not , never and hardly reverse the meaning of the word that follows . When a review "
        "contains but , the part after but matters most . Here are some labelled examples .\n\n"
    )
    # one example per label first, then the rest in order: deterministic and balanced
    shots: list[dict] = []
    for label in LABELS:
        shots.append(next(r for r in train_reviews if r["label"] == label and r not in shots))
    for row in train_reviews:
        if len(shots) >= n_shots:
            break
        if row not in shots:
            shots.append(row)
    examples = "".join(f"Review: {r['text']}\nSentiment: {r['label']}\n\n" for r in shots)
    return instruction + examples


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True, ensure_ascii=True) + "\n")


def build(out_dir: Path, seed: int = 1234, n_train_reviews: int = 40_000,
          n_test: int = 1_200) -> dict[str, Path]:
    reviews_train, reviews_test = make_reviews(seed, n_train_reviews, n_test)
    add_train, add_test = make_additions(seed, n_test)
    paths = {
        "reviews_train": out_dir / "reviews_train.jsonl",
        "reviews_test": out_dir / "reviews_test.jsonl",
        "addition_train": out_dir / "addition_train.jsonl",
        "addition_test": out_dir / "addition_test.jsonl",
        "shared_prefix": out_dir / "shared_prefix.txt",
    }
    write_jsonl(paths["reviews_train"], reviews_train)
    write_jsonl(paths["reviews_test"], reviews_test)
    write_jsonl(paths["addition_train"], add_train)
    write_jsonl(paths["addition_test"], add_test)
    paths["shared_prefix"].write_text(shared_prefix(reviews_train), encoding="utf-8", newline="\n")
    return paths
