//! The seeded generator of the embedded default dataset (LoCoMo format).
//!
//! Four conversations of sixteen dated sessions, about ninety questions each
//! (categories 1-4), built so that every failure mode of a memory pipeline
//! shows under a poor strategy:
//! - near-duplicate exchanges (routines retold with a detail changed, events
//!   attended in different months), which an aggressive dedup threshold merges,
//!   losing the later one's evidence;
//! - paraphrased questions sharing only word stems with their evidence
//!   (`volunteer` / `volunteering`), which BM25's exact terms miss and the
//!   trigram channel finds;
//! - entity collisions (three cats "called" something), which tie BM25 and
//!   are told apart only by a deeper top_k;
//! - temporal questions answered from session dates (relative times, "in May
//!   2023", "now"), which need date stamps and recency;
//! - revised facts (a new job, a new home): the "now" question carries
//!   `reference_versions` (its answer changes at the later mention, for
//!   longitudinal replay), and a question anchored to the earlier month keeps
//!   the first answer;
//! - multi-hop questions with evidence in two sessions linked by a name the
//!   question does not contain (query expansion), and counts over several
//!   sessions (a larger top_k for "how many");
//! - long rambling turns that crowd a small context budget, and one-word
//!   answers that a high `min_chars` drops.
//!
//! A few evidence ids are written messily on purpose, as in real files
//! (`D3:05`, `"D2:4; D7:9"`, an id of no turn, `"D"`).
//!
//! The output is a pure function of the seed (own PRNG, no hash-map order),
//! committed as `data/synthetic-locomo.json`, which the harness embeds. It is a
//! dev tool, not part of the harness library: the `gen_synthetic` example
//! regenerates the file and `tests/synthetic.rs` (which includes this module by
//! path) checks the committed bytes.

use serde_json::{Value, json};

use emend_harness::text::{civil_from_days, days_from_civil, month_name};

/// The seed of the committed dataset.
pub const SEED: u64 = 20_240_601;

const CONVERSATIONS: usize = 4;
const SESSIONS: usize = 16;
/// Exchanges (two turns each) per session, opener included.
const EXCHANGES_PER_SESSION: usize = 13;

/// SplitMix64: small, fast and fixed forever (the committed bytes depend on it).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
    fn shuffle<T>(&mut self, xs: &mut [T]) {
        for i in (1..xs.len()).rev() {
            let j = self.below(i + 1);
            xs.swap(i, j);
        }
    }
}

const SPEAKERS: &[&str] = &["Nadia", "Theo", "Priya", "Marcus", "Elena", "Jonah", "Sofia", "Daniel", "Amara", "Lukas"];

/// Slot pools: `{name}` in a template draws from the pool `name` (trailing
/// digits ignored: `{city2}` is another city).
const POOLS: &[(&str, &[&str])] = &[
    ("relative", &["sister", "brother", "cousin", "aunt", "uncle", "mom", "dad", "grandma"]),
    ("color", &["teal", "yellow", "silver", "forest green", "navy blue", "orange", "burgundy", "lilac"]),
    ("vehicle", &["bike", "scooter", "car", "kayak", "camper van", "motorcycle"]),
    (
        "book",
        &[
            "The Silent River",
            "Paper Lanterns",
            "A Map of Tides",
            "The Glass Orchard",
            "Northern Letters",
            "Salt and Cedar",
            "The Last Ferry",
            "Winter Apiary",
        ],
    ),
    ("class", &["pottery", "salsa", "woodworking", "calligraphy", "improv", "glassblowing", "bookbinding", "fencing"]),
    (
        "venue",
        &["community center", "library annex", "old town hall", "art studio on Fifth", "rec center", "church basement"],
    ),
    (
        "petname",
        &[
            "Biscuit", "Pepper", "Miso", "Juniper", "Waffles", "Clover", "Pickle", "Mango", "Ziggy", "Nutmeg", "Olive",
            "Bento", "Pretzel", "Sprout", "Tofu", "Marble",
        ],
    ),
    (
        "city",
        &[
            "Lisbon",
            "Kyoto",
            "Montreal",
            "Oslo",
            "Valencia",
            "Edinburgh",
            "Porto",
            "Tallinn",
            "Ljubljana",
            "Krakow",
            "Seville",
            "Bergen",
            "Galway",
            "Dubrovnik",
        ],
    ),
    (
        "dish",
        &[
            "mushroom risotto",
            "lamb tagine",
            "pad thai",
            "shakshuka",
            "chicken adobo",
            "butternut squash soup",
            "beef rendang",
            "spinach lasagna",
        ],
    ),
    ("instrument", &["cello", "ukulele", "trumpet", "banjo", "harp", "saxophone", "accordion"]),
    (
        "friend",
        &[
            "Felix", "Iris", "Rafael", "Greta", "Tobias", "Leila", "Mateo", "Ingrid", "Kofi", "Yara", "Silas", "Noor",
            "Dmitri", "Camille", "Ravi", "Astrid", "Bruno", "Maren", "Emeka", "Linnea",
        ],
    ),
    (
        "gift",
        &[
            "a leather journal",
            "a vintage camera",
            "a small telescope",
            "a cashmere scarf",
            "a record player",
            "a pasta machine",
            "a bonsai tree",
        ],
    ),
    (
        "product",
        &[
            "scheduling app",
            "payroll dashboard",
            "recipe website",
            "booking system",
            "inventory tracker",
            "fitness tracker app",
        ],
    ),
    (
        "restaurant",
        &[
            "Casa Lucia",
            "The Copper Pot",
            "Little Saigon",
            "Blue Fern",
            "Harbor Grill",
            "Saffron House",
            "The Olive Branch",
        ],
    ),
    ("place", &["train station", "airport", "farmers market", "bowling alley", "museum", "ferry terminal"]),
    ("age", &["thirty", "forty", "fifty", "sixty", "seventy", "eighty"]),
    ("workplace", &["hospital", "warehouse", "hotel", "call center", "bakery"]),
    ("language", &["Portuguese", "Japanese", "Norwegian", "Italian", "Korean", "Greek"]),
    ("band", &["The Velvet Pines", "Harbor Lights", "Neon Atlas", "The Quiet Foxes", "Paper Moons"]),
    ("furniture", &["dining table", "bookshelf", "coffee table", "writing desk", "rocking chair"]),
    ("party", &["barbecue", "potluck", "block party", "game night", "karaoke night"]),
    ("certificate", &["first aid", "scuba diving", "sommelier", "project management", "beekeeping"]),
    (
        "company",
        &[
            "Brightwave",
            "Northpeak Labs",
            "Halcyon Foods",
            "Greystone Bank",
            "Lumen Health",
            "Tidewater Logistics",
            "Orchid Media",
            "Bluebird Robotics",
        ],
    ),
    (
        "job",
        &[
            "pediatric nurse",
            "data analyst",
            "sous chef",
            "architect",
            "park ranger",
            "high school teacher",
            "graphic designer",
            "physiotherapist",
            "pharmacist",
            "carpenter",
        ],
    ),
    ("fish", &["rainbow trout", "pike", "perch", "largemouth bass", "walleye"]),
    ("volplace", &["animal shelter", "food bank", "children's hospital", "botanical garden", "homeless shelter"]),
    ("role", &["head nurse", "lead technician", "clinic manager", "senior counselor", "chief pharmacist"]),
    ("plant", &["tomatoes", "basil", "chili peppers", "strawberries", "lavender", "zucchini"]),
    ("pastry", &["cinnamon rolls", "sourdough loaves", "lemon tarts", "croissants", "banana bread"]),
    ("room", &["kitchen", "bathroom", "attic", "basement", "laundry room"]),
    ("distance", &["five kilometers", "ten kilometers", "three miles", "seven kilometers"]),
    ("collectible", &["postcards", "typewriters", "vinyl records", "film cameras", "teapots", "maps"]),
    ("subject", &["lighthouses", "city rooftops", "wildflowers", "old barns", "harbor boats"]),
    ("lesson", &["chess", "coding", "guitar", "self-defense", "origami"]),
    ("animal", &["greyhound", "tabby kitten", "rescue parrot", "pair of guinea pigs", "senior beagle"]),
    ("bird", &["herons", "owls", "kingfishers", "puffins", "woodpeckers"]),
    ("pool", &["lido by the river", "university pool", "YMCA", "old bathhouse"]),
    ("field", &["accounting", "psychology", "marine biology", "art history", "nutrition"]),
    ("thing", &["cat", "dog", "parrot", "horse", "goat", "tortoise"]),
    (
        "trait",
        &[
            "sleeps all day",
            "is terrified of thunder",
            "steals socks",
            "snores loudly",
            "loves cucumbers",
            "hates the vet",
        ],
    ),
    ("activity", &["kayaking", "bouldering", "birdwatching", "cycling", "fishing", "sailing", "hiking"]),
    ("topic", &["urban farming", "battery recycling", "sleep science", "bridge design", "soil health", "coral reefs"]),
    (
        "event",
        &[
            "jazz festival",
            "book fair",
            "film premiere",
            "charity gala",
            "robotics expo",
            "poetry slam",
            "wine tasting",
            "lantern parade",
        ],
    ),
    ("meetplace", &["climbing gym", "dog park", "pottery studio", "yoga retreat", "chess club", "language exchange"]),
    ("weather", &["gloomy", "humid", "windy", "chilly", "rainy"]),
    ("genre", &["cooking", "detective", "space", "dating", "survival"]),
    ("news", &["new bridge", "bakery closing", "mayor's plan", "marathon route", "tram strike"]),
    ("app", &["meditation", "budgeting", "language", "recipe", "habit"]),
];

fn pool(name: &str) -> &'static [&'static str] {
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit());
    POOLS.iter().find(|(n, _)| *n == base).map(|(_, p)| *p).unwrap_or_else(|| panic!("no pool {base}"))
}

/// Draws pool values without replacement (per conversation), refilling a
/// pool once it runs out.
struct Deck {
    left: Vec<(&'static str, Vec<&'static str>)>,
}

impl Deck {
    fn new() -> Self {
        Deck { left: Vec::new() }
    }
    fn draw(&mut self, rng: &mut Rng, name: &str) -> String {
        let base = name.trim_end_matches(|c: char| c.is_ascii_digit());
        let i = match self.left.iter().position(|(n, _)| *n == base) {
            Some(i) => i,
            None => {
                let (n, _) = POOLS.iter().find(|(n, _)| *n == base).unwrap_or_else(|| panic!("no pool {base}"));
                self.left.push((n, Vec::new()));
                self.left.len() - 1
            }
        };
        if self.left[i].1.is_empty() {
            self.left[i].1 = pool(base).to_vec();
        }
        let v = &mut self.left[i].1;
        let k = rng.below(v.len());
        v.swap_remove(k).to_string()
    }
}

/// Slot values of one template instance.
#[derive(Clone, Default)]
struct Slots(Vec<(String, String)>);

impl Slots {
    fn with(mut self, k: &str, v: &str) -> Self {
        self.0.push((k.to_string(), v.to_string()));
        self
    }
    fn get(&self, k: &str) -> Option<&str> {
        self.0.iter().find(|(x, _)| x == k).map(|(_, v)| v.as_str())
    }
    /// Fills `{name}` placeholders, drawing missing ones from the deck.
    fn fill(&mut self, rng: &mut Rng, deck: &mut Deck, t: &str) -> String {
        let mut out = String::new();
        let mut rest = t;
        while let Some(i) = rest.find('{') {
            out.push_str(&rest[..i]);
            let j = rest[i..].find('}').expect("closed placeholder") + i;
            let name = &rest[i + 1..j];
            let v = match self.get(name) {
                Some(v) => v.to_string(),
                None => {
                    let v = deck.draw(rng, name);
                    self.0.push((name.to_string(), v.clone()));
                    v
                }
            };
            out.push_str(&v);
            rest = &rest[j + 1..];
        }
        out.push_str(rest);
        out
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

struct Line {
    speaker: usize,
    text: String,
    caption: Option<String>,
}

struct Exchange {
    lines: [Line; 2],
}

#[derive(Clone)]
enum Gold {
    Text(String),
    Int(i64),
}

struct Qa {
    question: String,
    answer: Gold,
    category: u8,
    /// (exchange handle, line 0 or 1)
    evidence: Vec<(usize, usize)>,
    /// Reference versions of a revised fact: (session index from which it
    /// holds, answer, evidence); the last one is the question's own.
    versions: Vec<Version>,
}

/// (session index from which a reference holds, answer, evidence).
type Version = (usize, Gold, Vec<(usize, usize)>);

/// One conversation under construction.
struct Conv<'r> {
    rng: &'r mut Rng,
    deck: Deck,
    names: [String; 2],
    /// Day number of each session.
    days: Vec<i64>,
    exchanges: Vec<(usize, Exchange)>,
    qas: Vec<Qa>,
    /// Questions anchored to an earlier time, placed after the shuffled ones.
    anchored: Vec<Qa>,
}

// Templates: (statement, question, answer). {X} is the speaker, {Y} the other.
const SIMPLE: &[(&str, &str, &str)] = &[
    (
        "My {relative} just bought a {color} {vehicle} and won't stop talking about it.",
        "What color is the {vehicle} that {X}'s {relative} bought?",
        "{color}",
    ),
    ("I finally finished reading {book}, it took me almost a month.", "Which book did {X} finish reading?", "{book}"),
    ("I signed up for a {class} class at the {venue}.", "What class did {X} sign up for at the {venue}?", "{class}"),
    (
        "We adopted a puppy and named him {petname}, he is a little troublemaker.",
        "What did {X} name the puppy?",
        "{petname}",
    ),
    (
        "I'm planning a trip to {city} in the fall, mostly for the food.",
        "Where is {X} planning a trip in the fall?",
        "{city}",
    ),
    ("My comfort dish lately is {dish}, I make it every Sunday.", "What dish does {X} make every Sunday?", "{dish}"),
    (
        "I bought a {instrument} and my friend {friend} is giving me lessons.",
        "Who is giving {X} {instrument} lessons?",
        "{friend}",
    ),
    (
        "My {relative} got engaged in {city} over the holidays, we're all thrilled.",
        "Where did {X}'s {relative} get engaged?",
        "{city}",
    ),
    (
        "I repainted my bedroom {color}, it feels like a brand new space.",
        "What color did {X} repaint the bedroom?",
        "{color}",
    ),
    (
        "For my birthday I got {gift} from my {relative}.",
        "What birthday present did {X} get from the {relative}?",
        "{gift}",
    ),
    (
        "Our team at {company} finally shipped the new {product}.",
        "What did {X}'s team at {company} ship?",
        "the new {product}",
    ),
    (
        "{restaurant} downtown has the best dumplings I've ever had.",
        "Which restaurant has the best dumplings according to {X}?",
        "{restaurant}",
    ),
    ("My neighbour {friend} lent me a ladder so I could fix the gutter.", "Who lent {X} a ladder?", "{friend}"),
    ("I lost my wallet at the {place} but someone turned it in.", "Where did {X} lose the wallet?", "the {place}"),
    (
        "My {relative} is turning {age} next week and we are throwing a surprise party.",
        "What age is {X}'s {relative} turning?",
        "{age}",
    ),
    (
        "I switched to night shifts at the {workplace} for a few months.",
        "Which shifts did {X} switch to at the {workplace}?",
        "night shifts",
    ),
    ("I've decided to learn {language} before the big trip.", "Which language did {X} decide to learn?", "{language}"),
    (
        "My favorite band, {band}, is playing a reunion show in {city}.",
        "Which band is playing a reunion show in {city}?",
        "{band}",
    ),
    (
        "I ordered a {furniture} made of reclaimed oak for the living room.",
        "What did {X} order for the living room?",
        "a {furniture}",
    ),
    (
        "We hosted a {party} for the whole street last Saturday.",
        "What kind of party did {X} host for the street?",
        "a {party}",
    ),
    (
        "I got my {certificate} certificate after months of evening classes.",
        "Which certificate did {X} get?",
        "{certificate}",
    ),
    (
        "My {relative} gave me an old {instrument} that belonged to my grandfather.",
        "What did {X}'s {relative} give {X}?",
        "an old {instrument}",
    ),
    (
        "I tried the tasting menu at {restaurant} and the dessert was a {dish} ice cream, weirdly good.",
        "What flavor was the dessert at {restaurant}?",
        "{dish}",
    ),
    (
        "The {place} near my flat is getting a giant mural of {petname} the town mascot.",
        "Whose mural is going up at the {place}?",
        "{petname}",
    ),
];

const REPLIES: &[&str] = &[
    "That's amazing, {X}! Tell me more next time.",
    "Wow, I had no idea. Good for you!",
    "Ha, that sounds just like you.",
    "Oh nice, I'd love to see it sometime.",
    "That's so exciting, congratulations!",
    "No way! How did that happen?",
    "You always surprise me, {X}.",
    "I love that for you, honestly.",
    "Oh wow, that's a big deal.",
    "Sounds lovely. I'm a bit jealous!",
    "Good for you, you deserve it.",
    "Haha, I can totally picture it.",
    "That's wonderful news, {X}.",
    "Really? I want to hear everything.",
];

const LONG: &[(&str, &str, &str)] = &[
    (
        "So the whole weekend was chaos. We drove up to the cabin, the car made a weird rattling noise the entire way, the kids were fighting over snacks, and when we finally arrived the power was out. Anyway, the highlight was that I caught a {fish} in the lake, the biggest one I have ever caught, and we grilled it for dinner. Then it rained for two days straight and we played board games until everyone was sick of them.",
        "What fish did {X} catch at the cabin?",
        "a {fish}",
    ),
    (
        "Okay, long story. I went to the hardware store for a single screw, ran into my old teacher, ended up talking for an hour about her garden, then realized I had parked in a loading zone. By the time I got back there was a note on the windshield from a guy named {friend} who said he had moved my car for me because a truck needed the space, and he left his number in case I wanted the keys back. Wild day.",
        "Who moved {X}'s car from the loading zone?",
        "{friend}",
    ),
    (
        "Work has been a marathon this month. We had three deadlines in one week, the printer died twice, my manager kept changing the slides, and the coffee machine broke right before the client meeting. In the end we won the contract with {company}, which nobody expected, and my boss took the whole team out to celebrate. I am still catching up on sleep, honestly, and my inbox looks like a war zone.",
        "Which contract did {X}'s team win?",
        "the contract with {company}",
    ),
    (
        "The wedding was beautiful but exhausting. The ceremony started an hour late because the officiant got lost, the band played the same song three times, and my shoes were a terrible choice. My favorite part was the speech from the bride's {relative}, who told the story of how the couple met at a {place} during a snowstorm. Everybody cried, even the waiters, and then we danced until two in the morning.",
        "Where did the couple at the wedding meet?",
        "at a {place} during a snowstorm",
    ),
    (
        "I finally cleaned out the garage this weekend, which took way longer than I thought. There were boxes from three moves ago, a broken treadmill, two bikes with flat tires, and a whole shelf of paint cans. At the very bottom of one box I found my old {instrument} from high school, still in its case, and I played it for an hour. The neighbours probably hated me, but it made my whole week.",
        "What did {X} find at the bottom of a box in the garage?",
        "an old {instrument}",
    ),
    (
        "My trip home was a comedy of errors. The flight was delayed four hours, my suitcase went to the wrong city, and the taxi driver took the scenic route through every roadwork in town. But the best thing happened at the gate: I sat next to a retired {job} who told me stories about working in {city} in the seventies, and we ended up swapping emails. Sometimes delays are a gift.",
        "Who did {X} sit next to at the gate?",
        "a retired {job}",
    ),
    (
        "Our book club meeting went completely off the rails. Nobody had finished the book, two people argued about whether the ending was a dream, and the host's dog ate half the cheese board. Then someone suggested we read {book} next, and we spent forty minutes debating it before voting. It won by a single vote, so now I have to read it by the end of the month, which is going to be tough with my schedule.",
        "Which book did {X}'s book club vote to read next?",
        "{book}",
    ),
];

const PARAPHRASE: &[(&str, &str, &str)] = &[
    ("Lately I've been volunteering every weekend at the {volplace}.", "Where does {X} volunteer?", "the {volplace}"),
    ("I got promoted to {role} at the clinic this spring.", "What promotion did {X} receive?", "{role}"),
    (
        "We're relocating to {city} next spring for the kids' schooling.",
        "What is the destination of {X}'s relocation?",
        "{city}",
    ),
    ("I've been gardening a lot, mostly growing {plant}.", "What does {X} grow in the garden?", "{plant}"),
    ("I started baking {pastry} for the neighbours on Fridays.", "What does {X} bake?", "{pastry}"),
    (
        "We renovated the {room} over the summer, new tiles and everything.",
        "Which part of the house got a renovation by {X}?",
        "the {room}",
    ),
    ("I've been running {distance} every morning before work.", "How far does {X} run?", "{distance}"),
    (
        "I'm collecting vintage {collectible}, my shelves are full.",
        "What is in {X}'s collection?",
        "vintage {collectible}",
    ),
    ("I've been painting {subject} in watercolors.", "What are {X}'s paintings of?", "{subject}"),
    ("I'm teaching {lesson} classes at the youth club.", "What does {X} teach?", "{lesson}"),
    ("We're adopting a {animal} from the rescue next month.", "What is {X} planning to adopt?", "a {animal}"),
    ("I was photographing {bird} out at the marsh all morning.", "What was {X}'s photography subject?", "{bird}"),
    ("I've been swimming laps at the {pool} three times a week.", "Where does {X} swim?", "the {pool}"),
    ("I'm studying {field} at night school.", "What is {X} a student of?", "{field}"),
    ("I finished knitting a sweater for {friend}.", "For whom did {X} knit something?", "{friend}"),
];

const FILLER: &[&str] = &[
    "The weather has been so {weather} lately, I barely left the house.",
    "I've been binge-watching a {genre} series, it's ridiculous but fun.",
    "Work was fine, nothing exciting, just lots of emails.",
    "I'm so tired today, the neighbours had a party until two.",
    "Did you see the news about the {news}?",
    "I tried a new coffee place, the oat latte was decent.",
    "My phone screen cracked again, I need a better case.",
    "We had pizza night with the kids, total chaos.",
    "I'm trying to drink more water, it's harder than it sounds.",
    "Traffic was terrible this morning, a truck broke down on the ring road.",
    "I reorganized my closet and found clothes I forgot I owned.",
    "My plants are not doing great, I think I overwater them.",
    "I finally slept eight hours, I feel like a new person.",
    "Have you tried that {app} app everyone is talking about?",
    "I spent the evening sorting old photos from school.",
    "The gym was packed today, I gave up after twenty minutes.",
    "I burned the rice again, I swear the pot is cursed.",
    "I'm thinking about getting bangs, is that a terrible idea?",
    "My inbox is a disaster, I have three hundred unread messages.",
    "We watched the meteor shower from the roof, it was beautiful.",
    "I've been trying to cook more at home to save money.",
    "The power went out for an hour yesterday, we played cards by candlelight.",
    "I need a vacation from my vacation, honestly.",
    "Someone left a box of free books on our street, I grabbed three.",
    "I can't believe how fast this year is going.",
    "My downstairs neighbour started learning the drums, send help.",
    "I finally fixed the squeaky door, it only took me six months.",
    "The supermarket changed its layout and now I can't find anything.",
    "I went for a long walk without my phone, it felt strange but good.",
    "We're thinking of repainting the fence this summer, maybe.",
];

const FILLER_REPLIES: &[&str] = &[
    "Ha, I know exactly what you mean.",
    "Oh no, that sounds exhausting.",
    "Honestly, same here.",
    "You should totally go for it!",
    "That's so relatable, {X}.",
    "Haha, classic.",
    "I hope it gets better soon.",
    "Tell me about it!",
    "Ugh, I feel that.",
    "That sounds nice, actually.",
    "Oh wow, I didn't know that.",
    "Same thing happened to me last month.",
    "Sounds like a plan.",
    "Yikes. Hang in there!",
];

const CAPTIONS: &[&str] = &[
    "a photo of a sunset over a lake with trees",
    "a photo of a cup of coffee on a wooden table",
    "a photo of a cat sleeping on a windowsill",
    "a photo of a city street at night with lights",
    "a photo of a plate of pasta with basil",
    "a photo of a mountain trail covered in snow",
];

impl Conv<'_> {
    fn add(&mut self, session: usize, x: usize, first: String, second: String) -> usize {
        self.exchanges.push((
            session,
            Exchange {
                lines: [
                    Line { speaker: x, text: first, caption: None },
                    Line { speaker: 1 - x, text: second, caption: None },
                ],
            },
        ));
        self.exchanges.len() - 1
    }

    fn slots(&self, x: usize) -> Slots {
        Slots::default().with("X", &self.names[x]).with("Y", &self.names[1 - x])
    }

    fn reply(&mut self, slots: &mut Slots) -> String {
        let t = *self.rng.pick(REPLIES);
        slots.fill(self.rng, &mut self.deck, t)
    }

    fn speaker(&mut self) -> usize {
        self.rng.below(2)
    }

    fn session(&mut self) -> usize {
        self.rng.below(SESSIONS)
    }

    fn qa(&mut self, question: String, answer: Gold, category: u8, evidence: Vec<(usize, usize)>) {
        self.qas.push(Qa { question, answer, category, evidence, versions: Vec::new() });
    }

    /// A statement with its question (and an optional reply), in a session.
    fn fact(&mut self, session: usize, t: (&str, &str, &str), category: u8) -> (usize, Slots) {
        let x = self.speaker();
        let mut s = self.slots(x);
        let stmt = s.fill(self.rng, &mut self.deck, t.0);
        let q = s.fill(self.rng, &mut self.deck, t.1);
        let a = s.fill(self.rng, &mut self.deck, t.2);
        let reply = self.reply(&mut s);
        let h = self.add(session, x, stmt, reply);
        self.qa(q, Gold::Text(a), category, vec![(h, 0)]);
        (h, s)
    }

    fn date(&self, session: usize) -> String {
        let (y, m, d) = civil_from_days(self.days[session]);
        format!("{d} {} {y}", month_name(m))
    }

    fn build(&mut self) {
        // Single-hop facts, each template at most once.
        let mut simple: Vec<usize> = (0..SIMPLE.len()).collect();
        self.rng.shuffle(&mut simple);
        for &i in simple.iter().take(20) {
            let s = self.session();
            self.fact(s, SIMPLE[i], 4);
        }
        let mut long: Vec<usize> = (0..LONG.len()).collect();
        self.rng.shuffle(&mut long);
        for &i in long.iter().take(5) {
            let s = self.session();
            self.fact(s, LONG[i], 4);
        }
        let mut para: Vec<usize> = (0..PARAPHRASE.len()).collect();
        self.rng.shuffle(&mut para);
        for &i in para.iter().take(10) {
            let s = self.session();
            self.fact(s, PARAPHRASE[i], 4);
        }
        self.collisions();
        self.routines();
        self.short_answers();
        self.relative_times();
        self.months();
        self.current();
        self.how_long();
        self.bridges();
        self.counts();
        self.two_sessions();
        self.reasoning();
        self.filler();
    }

    /// Three owners of the same kind of animal, all "called" something; the
    /// question's owner speaks last.
    fn collisions(&mut self) {
        for _ in 0..5 {
            let thing = self.deck.draw(self.rng, "thing");
            let gold_session = self.rng.range(6, SESSIONS - 1);
            let x = self.speaker();
            for (who, owner) in [(1 - x, "My cousin's"), (x, "The")] {
                let s = self.rng.below(gold_session);
                let mut sl = self.slots(who).with("thing", &thing);
                let suffix = if owner == "The" { " next door" } else { "" };
                let t = format!("{owner} {{thing}}{suffix} is called {{petname}}, it {{trait}}.");
                let stmt = sl.fill(self.rng, &mut self.deck, &t);
                let reply = self.reply(&mut sl);
                self.add(s, who, stmt, reply);
            }
            let mut sl = self.slots(x).with("thing", &thing);
            let stmt = sl.fill(self.rng, &mut self.deck, "Our {thing} is called {petname}, it {trait}.");
            let reply = self.reply(&mut sl);
            let h = self.add(gold_session, x, stmt, reply);
            let q = sl.fill(self.rng, &mut self.deck, "What is {X}'s {thing} called?");
            let a = sl.get("petname").unwrap_or_default().to_string();
            self.qa(q, Gold::Text(a), 4, vec![(h, 0)]);
        }
    }

    /// Routines retold with one detail changed: near-duplicates of each other.
    fn routines(&mut self) {
        const R: &[(&str, &str, &str, &str)] = &[
            (
                "Another busy week at work, so on Saturday I finally relaxed and went {activity} with {friend} near the old mill, which was exactly what I needed after all those meetings.",
                "That sounds like the perfect way to unwind after a long week, {X}!",
                "Who did {X} go {activity} with near the old mill?",
                "{friend}",
            ),
            (
                "Dinner at {restaurant} with my {relative} tonight, we ordered the {dish}.",
                "Yum, save me some next time!",
                "What did {X} order at {restaurant}?",
                "the {dish}",
            ),
            (
                "Just got back from a conference in {city} about {topic}.",
                "How was it? Did you learn a lot?",
                "What was the conference in {city} about?",
                "{topic}",
            ),
            (
                "Quick update on the house: the leaky faucet in the {room} is finally fixed, I watched about ten videos and did the whole thing myself.",
                "Look at you, a real handyman now!",
                "Which room's leaky faucet did {X} fix?",
                "the {room}",
            ),
        ];
        let x = self.speaker();
        for r in R {
            let mut sessions: Vec<usize> = (0..SESSIONS).collect();
            self.rng.shuffle(&mut sessions);
            for &s in sessions.iter().take(2) {
                let mut sl = self.slots(x);
                let stmt = sl.fill(self.rng, &mut self.deck, r.0);
                let reply = sl.fill(self.rng, &mut self.deck, r.1);
                let h = self.add(s, x, stmt, reply);
                let q = sl.fill(self.rng, &mut self.deck, r.2);
                let a = sl.fill(self.rng, &mut self.deck, r.3);
                self.qa(q, Gold::Text(a), 4, vec![(h, 0)]);
            }
        }
    }

    /// A one-word answer to the other speaker's question.
    fn short_answers(&mut self) {
        const S: &[(&str, &str, &str)] = &[
            ("What did you end up naming the new kitten?", "{petname}!", "What is the name of {X}'s new kitten?"),
            ("Which city are you flying to next week?", "{city}.", "Which city is {X} flying to?"),
            ("So what instrument did you finally pick?", "The {instrument}.", "Which instrument did {X} pick?"),
        ];
        for t in S.iter().take(2) {
            let x = self.speaker();
            let s = self.session();
            let mut sl = self.slots(x);
            let ask = sl.fill(self.rng, &mut self.deck, t.0);
            let ans = sl.fill(self.rng, &mut self.deck, t.1);
            let q = sl.fill(self.rng, &mut self.deck, t.2);
            let a = ans.trim_end_matches(['.', '!']).trim_start_matches("The ").to_string();
            let h = self.add(s, 1 - x, ask, ans);
            self.qa(q, Gold::Text(a), 4, vec![(h, 1)]);
        }
    }

    /// Events told with a relative time; the answer is a date.
    fn relative_times(&mut self) {
        const E: &[(&str, &str)] = &[
            ("ran my first half marathon", "run a half marathon"),
            ("passed my driving test", "pass the driving test"),
            ("had my job interview at {company}", "have the job interview at {company}"),
            ("moved into the new apartment", "move into the new apartment"),
            ("saw {band} live", "see {band} live"),
            ("broke my wrist skiing", "break a wrist skiing"),
            ("planted an apple tree in the yard", "plant an apple tree"),
            ("got my first tattoo", "get a first tattoo"),
            ("joined a community choir", "join a community choir"),
            ("sold my old car", "sell the old car"),
        ];
        let when: &[(&str, i64, &str)] = &[
            ("yesterday", 1, ""),
            ("this morning", 0, ""),
            ("two days ago", 2, ""),
            ("last week", 7, "the week before "),
            ("last weekend", 7, "the weekend before "),
        ];
        let mut order: Vec<usize> = (0..E.len()).collect();
        self.rng.shuffle(&mut order);
        for &i in order.iter().take(8) {
            let (w, back, rel) = *self.rng.pick(when);
            let x = self.speaker();
            let s = self.session();
            let mut sl = self.slots(x);
            let what = sl.fill(self.rng, &mut self.deck, E[i].0);
            let stmt = capitalize(&format!("{w} I {what}, still processing it!"));
            let reply = self.reply(&mut sl);
            let h = self.add(s, x, stmt, reply);
            let q = format!("When did {} {}?", self.names[x], sl.fill(self.rng, &mut self.deck, E[i].1));
            let answer = if rel.is_empty() {
                let (y, m, d) = civil_from_days(self.days[s] - back);
                format!("{d} {} {y}", month_name(m))
            } else {
                format!("{rel}{}", self.date(s))
            };
            self.qa(q, Gold::Text(answer), 2, vec![(h, 0)]);
        }
    }

    /// Events attended in different months: only the session date tells them apart.
    fn months(&mut self) {
        let x = self.speaker();
        let mut by_month: Vec<(i64, u32, usize)> = Vec::new();
        for s in 0..SESSIONS {
            let (y, m, _) = civil_from_days(self.days[s]);
            if !by_month.iter().any(|&(yy, mm, _)| yy == y && mm == m) {
                by_month.push((y, m, s));
            }
        }
        self.rng.shuffle(&mut by_month);
        for &(y, m, s) in by_month.iter().take(4) {
            let mut sl = self.slots(x);
            let stmt = sl.fill(self.rng, &mut self.deck, "I attended a {event} downtown, it was packed.");
            let reply = self.reply(&mut sl);
            let h = self.add(s, x, stmt, reply);
            let q = format!("Which event did {} attend in {} {y}?", self.names[x], month_name(m));
            let a = sl.get("event").unwrap_or_default().to_string();
            self.qa(q, Gold::Text(a), 2, vec![(h, 0)]);
        }
    }

    /// A job and a home that changed (revised facts): the current-truth
    /// question's reference changes with the later mention (reference
    /// versions), the question anchored to the earlier month keeps the first.
    fn current(&mut self) {
        const C: &[(&str, &str, &str, &str)] = &[
            (
                "I just started working at {company} as a {job}.",
                "Which company is {X} working at now?",
                "{company}",
                "Which company was {X} working at in {when}?",
            ),
            (
                "We just moved to {city}, I love our new street.",
                "Which city does {X} live in now?",
                "{city}",
                "Which city did {X} live in in {when}?",
            ),
        ];
        for t in C {
            let x = self.speaker();
            let early = self.rng.range(0, 4);
            let late = self.rng.range(10, SESSIONS - 1);
            let mut told = Vec::new();
            for s in [early, late] {
                let mut sl = self.slots(x);
                let stmt = sl.fill(self.rng, &mut self.deck, t.0);
                let reply = self.reply(&mut sl);
                let h = self.add(s, x, stmt, reply);
                let a = sl.fill(self.rng, &mut self.deck, t.2);
                told.push((s, h, a, sl));
            }
            let (_, first_h, first_a, _) = &told[0];
            let (first_h, first_a) = (*first_h, first_a.clone());
            let (_, h, a, mut sl) = told.pop().expect("two mentions");
            let q = sl.fill(self.rng, &mut self.deck, t.1);
            let versions = vec![
                (early, Gold::Text(first_a.clone()), vec![(first_h, 0)]),
                (late, Gold::Text(a.clone()), vec![(h, 0)]),
            ];
            self.qas.push(Qa { question: q, answer: Gold::Text(a), category: 2, evidence: vec![(h, 0)], versions });
            let (y, m, _) = civil_from_days(self.days[early]);
            let anchored = t.3.replace("{X}", &self.names[x]).replace("{when}", &format!("{} {y}", month_name(m)));
            // Kept apart and appended after the shuffle, so that adding them
            // left every other question and turn of the dataset as it was.
            self.anchored.push(Qa {
                question: anchored,
                answer: Gold::Text(first_a),
                category: 2,
                evidence: vec![(first_h, 0)],
                versions: Vec::new(),
            });
        }
    }

    fn how_long(&mut self) {
        const H: &[&str] = &["practicing yoga", "playing chess", "keeping bees", "writing poetry", "learning piano"];
        let mut order: Vec<usize> = (0..H.len()).collect();
        self.rng.shuffle(&mut order);
        for &i in order.iter().take(3) {
            let x = self.speaker();
            let s = self.session();
            let n = self.rng.range(2, 12);
            let stmt = format!("Can you believe I've been {} for {n} years now?", H[i]);
            let mut sl = self.slots(x);
            let reply = self.reply(&mut sl);
            let h = self.add(s, x, stmt, reply);
            let q = format!("How long has {} been {}?", self.names[x], H[i]);
            self.qa(q, Gold::Text(format!("{n} years")), 2, vec![(h, 0)]);
        }
    }

    /// Someone met in one session, their news in a later one; the question
    /// names the meeting place, not the person.
    fn bridges(&mut self) {
        const B: &[(&str, &str, &str)] = &[
            (
                "{friend} told me they work as a {job} and honestly love it.",
                "What job does the person {X} met at the {meetplace} have?",
                "{job}",
            ),
            (
                "{friend} showed me photos from a trip to {city}, it looked unreal.",
                "Which city did the person {X} met at the {meetplace} travel to?",
                "{city}",
            ),
            (
                "{friend} just adopted a {animal}, I got to meet it yesterday.",
                "What pet did the person {X} met at the {meetplace} adopt?",
                "a {animal}",
            ),
        ];
        for i in 0..5 {
            let t = B[i % B.len()];
            let x = self.speaker();
            let first = self.rng.range(0, SESSIONS - 5);
            let second = self.rng.range(first + 3, SESSIONS - 1);
            let mut sl = self.slots(x);
            let meet = sl.fill(
                self.rng,
                &mut self.deck,
                "I met someone named {friend} at the {meetplace}, we talked for hours.",
            );
            let reply = self.reply(&mut sl);
            let h1 = self.add(first, x, meet, reply);
            let news = sl.fill(self.rng, &mut self.deck, t.0);
            let reply = self.reply(&mut sl);
            let h2 = self.add(second, x, news, reply);
            let q = sl.fill(self.rng, &mut self.deck, t.1);
            let a = sl.fill(self.rng, &mut self.deck, t.2);
            self.qa(q, Gold::Text(a), 1, vec![(h1, 0), (h2, 0)]);
        }
    }

    /// Trips to one city told in several sessions, plus a mention by the other speaker.
    fn counts(&mut self) {
        const V: &[&str] = &[
            "Back in {city} again for work, same hotel as always.",
            "I spent three days in {city} for a client visit.",
            "Flew to {city} this morning for the trade show.",
            "Another weekend in {city}, my favorite bakery there remembered me.",
        ];
        for _ in 0..3 {
            let x = self.speaker();
            let city = self.deck.draw(self.rng, "city");
            let n = self.rng.range(2, 4);
            let mut sessions: Vec<usize> = (0..SESSIONS).collect();
            self.rng.shuffle(&mut sessions);
            let mut ev = Vec::new();
            for (k, &s) in sessions.iter().take(n).enumerate() {
                let mut sl = self.slots(x).with("city", &city);
                let stmt = sl.fill(self.rng, &mut self.deck, V[k]);
                let reply = self.reply(&mut sl);
                ev.push((self.add(s, x, stmt, reply), 0));
            }
            let s = sessions[n];
            let mut sl = self.slots(1 - x).with("city", &city);
            let stmt =
                sl.fill(self.rng, &mut self.deck, "My cousin says {city} is overrated, but I still want to see it.");
            let reply = self.reply(&mut sl);
            self.add(s, 1 - x, stmt, reply);
            let q = format!("How many times did {} travel to {city}?", self.names[x]);
            self.qa(q, Gold::Int(n as i64), 1, ev);
        }
    }

    /// A gift in one session, the birthday dinner in another.
    fn two_sessions(&mut self) {
        for _ in 0..3 {
            let x = self.speaker();
            let first = self.rng.range(0, SESSIONS - 3);
            let second = self.rng.range(first + 1, SESSIONS - 1);
            let mut sl = self.slots(x);
            let a =
                sl.fill(self.rng, &mut self.deck, "I bought {gift} for my {relative}'s birthday, I hope it's a hit.");
            let reply = self.reply(&mut sl);
            let h1 = self.add(first, x, a, reply);
            let b = sl.fill(self.rng, &mut self.deck, "My {relative}'s birthday dinner at {restaurant} was lovely.");
            let reply = self.reply(&mut sl);
            let h2 = self.add(second, x, b, reply);
            let q = sl.fill(
                self.rng,
                &mut self.deck,
                "What gift did {X} buy for the {relative} whose birthday dinner was at {restaurant}?",
            );
            let ans = sl.fill(self.rng, &mut self.deck, "{gift}");
            self.qa(q, Gold::Text(ans), 1, vec![(h1, 0), (h2, 0)]);
        }
    }

    fn reasoning(&mut self) {
        const LIKES: &[(&str, &str, &str)] = &[
            ("hiking", "Hiking", "a hiking trip in the Dolomites"),
            ("birdwatching", "Birdwatching", "a guided birdwatching tour"),
            ("gardening", "Gardening", "a garden design workshop"),
            ("cycling", "Cycling", "a cycling tour along the coast"),
            ("stargazing", "Stargazing", "a night at an observatory"),
            ("sketching", "Sketching", "a sketching retreat in Tuscany"),
        ];
        const DISLIKES: &[(&str, &str)] = &[
            ("crowded concerts", "a huge music festival"),
            ("heights", "a skydiving lesson"),
            ("cold water", "a polar plunge"),
            ("long flights", "a trip to Australia"),
        ];
        let mut order: Vec<usize> = (0..LIKES.len()).collect();
        self.rng.shuffle(&mut order);
        for &i in order.iter().take(4) {
            let (gerund, cap, activity) = LIKES[i];
            let x = self.speaker();
            let first = self.rng.range(0, SESSIONS - 3);
            let second = self.rng.range(first + 1, SESSIONS - 1);
            let mut sl = self.slots(x);
            let r1 = self.reply(&mut sl);
            let h1 = self.add(first, x, format!("I spent the whole weekend {gerund}, I could do it forever."), r1);
            let r2 = self.reply(&mut sl);
            let h2 = self.add(second, x, format!("{cap} is the only thing that really clears my head."), r2);
            let q = format!("Would {} likely enjoy {activity}?", self.names[x]);
            let a = format!("Yes, {} loves {gerund}", self.names[x]);
            self.qa(q, Gold::Text(a), 3, vec![(h1, 0), (h2, 0)]);
        }
        let mut order: Vec<usize> = (0..DISLIKES.len()).collect();
        self.rng.shuffle(&mut order);
        for &i in order.iter().take(3) {
            let (thing, activity) = DISLIKES[i];
            let x = self.speaker();
            let s = self.session();
            let mut sl = self.slots(x);
            let r = self.reply(&mut sl);
            let h = self.add(s, x, format!("I really can't stand {thing}, they make me anxious."), r);
            let q = format!("Would {} likely sign up for {activity}?", self.names[x]);
            self.qa(q, Gold::Text(format!("No, {} can't stand {thing}", self.names[x])), 3, vec![(h, 0)]);
        }
    }

    fn filler(&mut self) {
        for s in 0..SESSIONS {
            let have = self.exchanges.iter().filter(|(t, _)| *t == s).count();
            for _ in have..EXCHANGES_PER_SESSION.saturating_sub(1) {
                let x = self.speaker();
                let mut sl = self.slots(x);
                let t = *self.rng.pick(FILLER);
                let stmt = sl.fill(self.rng, &mut self.deck, t);
                let r = *self.rng.pick(FILLER_REPLIES);
                let reply = sl.fill(self.rng, &mut self.deck, r);
                let h = self.add(s, x, stmt, reply);
                if self.rng.below(8) == 0 {
                    let c = *self.rng.pick(CAPTIONS);
                    self.exchanges[h].1.lines[0].caption = Some(c.to_string());
                }
            }
        }
    }
}

fn opener(rng: &mut Rng, names: &[String; 2]) -> Exchange {
    const HI: &[&str] = &[
        "Hey {Y}! How have you been?",
        "Hi {Y}, long time no talk!",
        "{Y}! Got a minute to catch up?",
        "Morning {Y}, how's your week going?",
    ];
    const BACK: &[&str] = &[
        "Hey {X}! Good, busy as always. What's new with you?",
        "Hi {X}! So good to hear from you.",
        "Always, {X}. What's going on?",
        "Not bad at all, {X}. You?",
    ];
    let x = rng.below(2);
    let fill = |t: &str| t.replace("{X}", &names[x]).replace("{Y}", &names[1 - x]);
    let (hi, back) = (*rng.pick(HI), *rng.pick(BACK));
    Exchange {
        lines: [
            Line { speaker: x, text: fill(hi), caption: None },
            Line { speaker: 1 - x, text: fill(back), caption: None },
        ],
    }
}

/// Generates the dataset for a seed, as pretty-printed JSON with a final newline.
pub fn generate(seed: u64) -> String {
    let mut rng = Rng(seed);
    let mut samples = Vec::new();
    let mut speakers: Vec<&str> = SPEAKERS.to_vec();
    rng.shuffle(&mut speakers);
    for c in 0..CONVERSATIONS {
        let names = [speakers[2 * c].to_string(), speakers[2 * c + 1].to_string()];
        let mut day = days_from_civil(2022 + rng.range(0, 1) as i64, rng.range(1, 12) as u32, rng.range(1, 28) as u32);
        let mut days = Vec::new();
        for _ in 0..SESSIONS {
            days.push(day);
            day += rng.range(6, 34) as i64;
        }
        let mut conv = Conv {
            rng: &mut rng,
            deck: Deck::new(),
            names: names.clone(),
            days,
            exchanges: Vec::new(),
            qas: Vec::new(),
            anchored: Vec::new(),
        };
        conv.build();
        let Conv { days, exchanges, mut qas, anchored, .. } = conv;

        // Lay out sessions: an opener, then the session's exchanges shuffled.
        let mut ids: Vec<[String; 2]> = vec![Default::default(); exchanges.len()];
        let mut conversation = serde_json::Map::new();
        conversation.insert("speaker_a".into(), json!(names[0]));
        conversation.insert("speaker_b".into(), json!(names[1]));
        for (s, &d) in days.iter().enumerate() {
            let mut mine: Vec<usize> = (0..exchanges.len()).filter(|&h| exchanges[h].0 == s).collect();
            rng.shuffle(&mut mine);
            let open = opener(&mut rng, &names);
            let mut turns = Vec::new();
            let push = |line: &Line, turns: &mut Vec<Value>| -> String {
                let id = format!("D{}:{}", s + 1, turns.len() + 1);
                let mut t = serde_json::Map::new();
                t.insert("speaker".into(), json!(names[line.speaker]));
                t.insert("dia_id".into(), json!(id));
                t.insert("text".into(), json!(line.text));
                if let Some(c) = &line.caption {
                    t.insert("blip_caption".into(), json!(c));
                }
                turns.push(Value::Object(t));
                id
            };
            for l in &open.lines {
                push(l, &mut turns);
            }
            for h in mine {
                for (k, l) in exchanges[h].1.lines.iter().enumerate() {
                    ids[h][k] = push(l, &mut turns);
                }
            }
            let (y, m, dd) = civil_from_days(d);
            let hour = rng.range(1, 12);
            let minute = rng.range(0, 59);
            let ampm = if rng.below(2) == 0 { "am" } else { "pm" };
            conversation.insert(
                format!("session_{}_date_time", s + 1),
                json!(format!("{hour}:{minute:02} {ampm} on {dd} {}, {y}", month_name(m))),
            );
            conversation.insert(format!("session_{}", s + 1), Value::Array(turns));
        }

        rng.shuffle(&mut qas);
        qas.extend(anchored);
        let mut qa = Vec::new();
        for (k, q) in qas.iter().enumerate() {
            let mut evidence: Vec<String> = q.evidence.iter().map(|&(h, l)| ids[h][l].clone()).collect();
            // Messy ids, as real files have them (one kind per conversation);
            // never on a revised fact, whose last version must match.
            match (c, if q.versions.is_empty() { k } else { usize::MAX }) {
                (0, 3) => {
                    evidence = evidence
                        .iter()
                        .map(|e| {
                            let (a, b) = e.split_once(':').expect("an id");
                            format!("{a}:0{b}")
                        })
                        .collect()
                }
                (1, _) if q.evidence.len() == 2 && !qa_has_joined(&qa) => evidence = vec![evidence.join("; ")],
                (2, 5) => evidence.push(format!("D{}:1", SESSIONS + 4)),
                (3, 7) => evidence = vec!["D".to_string()],
                _ => {}
            }
            let answer = match &q.answer {
                Gold::Text(t) => json!(t),
                Gold::Int(n) => json!(n),
            };
            let mut entry =
                json!({"question": q.question, "answer": answer, "evidence": evidence, "category": q.category});
            if !q.versions.is_empty() {
                let versions: Vec<Value> = q
                    .versions
                    .iter()
                    .map(|(s, a, ev)| {
                        let a = match a {
                            Gold::Text(t) => json!(t),
                            Gold::Int(n) => json!(n),
                        };
                        let ev: Vec<String> = ev.iter().map(|&(h, l)| ids[h][l].clone()).collect();
                        json!({"from_session": s + 1, "answer": a, "evidence": ev})
                    })
                    .collect();
                entry["reference_versions"] = Value::Array(versions);
            }
            qa.push(entry);
        }
        samples.push(json!({
            "sample_id": format!("syn-{}", c + 1),
            "conversation": Value::Object(conversation),
            "qa": qa,
        }));
    }
    let mut out = serde_json::to_string_pretty(&Value::Array(samples)).expect("JSON serializes");
    out.push('\n');
    out
}

fn qa_has_joined(qa: &[Value]) -> bool {
    qa.iter().any(|q| {
        q["evidence"].as_array().is_some_and(|e| e.iter().any(|x| x.as_str().is_some_and(|s| s.contains(';'))))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_a_pure_function_of_the_seed() {
        assert_eq!(generate(7), generate(7));
        assert_ne!(generate(7), generate(8));
    }
}
