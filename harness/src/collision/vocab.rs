//! The collision protocol's vocabularies, memory templates and names.
//!
//! Two vocabularies of the same five tags, sharing `service` and `tool`
//! (lexical: a closed enum of one-word names; the query describes what the
//! named thing is used for without sharing a word with it). `seed` follows
//! seed 001: `preference`, `project` and `technical` are intent-style (a free
//! phrasal slot of three index terms; the query states a need in words that
//! share no word stem with the answer: `get an old bike running again` for
//! `restoring a vintage motorcycle`). `emend`, the protocol's first
//! vocabulary, has one-word answers for every tag: `project` and `technical`
//! are closed vocabularies of named things (lexical), `preference` a dish
//! or drink (intent: the query states a craving).

/// Whether a tag's answer slot is a closed enum of names or a free phrase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotClass {
    /// A closed vocabulary of one-word names.
    Lexical,
    /// An open phrasal slot: what someone wants, does or is stuck on.
    Intent,
}

impl SlotClass {
    pub fn name(self) -> &'static str {
        match self {
            SlotClass::Lexical => "lexical",
            SlotClass::Intent => "intent",
        }
    }
}

/// One discriminator tag: its slot noun, the query form and a vocabulary of
/// (answer, description) pairs. Within a tag every answer has the same
/// number of index terms; descriptions share no whole word with any answer,
/// entity or memory template.
pub struct TagSpec {
    pub name: &'static str,
    pub class: SlotClass,
    /// The slot noun of the memory templates (`{entity} said the {slot} is {value}.`).
    pub slot: &'static str,
    /// The query, with `{entity}` and `{hint}`.
    pub query: &'static str,
    pub vocab: &'static [(&'static str, &'static str)],
}

/// Memory templates: `paraphrase` N uses the first N, one drawn per memory.
/// Each has exactly one index term besides the entity, slot and value (so
/// BM25 still scores all K memories alike), none of them in any query.
pub const TEMPLATES: &[&str] = &[
    "{entity} said the {slot} is {value}.",
    "{entity} mentioned that the {slot} is {value}.",
    "According to {entity}, the {slot} is {value}.",
    "The {slot} is {value}, {entity} explained.",
    "{entity} noted the {slot}: {value}.",
    "{value} is the {slot}, {entity} confirmed.",
    "As {entity} put it, the {slot} is {value}.",
    "{entity} named the {slot} as {value}.",
];

/// `service`: a closed vocabulary of named services, the query a description
/// of what the service is used for (both vocabularies).
const SERVICE: TagSpec = TagSpec {
    name: "service",
    class: SlotClass::Lexical,
    slot: "service",
    query: "Which service does {entity} use for {hint}?",
    vocab: &[
        ("Netflix", "watching films at night"),
        ("Spotify", "listening to music playlists"),
        ("Dropbox", "backing up documents"),
        ("Slack", "team chat messages at work"),
        ("Zoom", "video calls"),
        ("Uber", "getting a ride across town"),
        ("Airbnb", "booking a vacation rental"),
        ("Venmo", "paying friends back"),
        ("Duolingo", "practicing a foreign language"),
        ("Audible", "audiobooks on the commute"),
        ("Instacart", "grocery delivery"),
        ("Grammarly", "fixing typos in essays"),
        ("Shopify", "selling handmade goods on a web shop"),
        ("Twitch", "livestreaming video games"),
        ("Coursera", "taking university courses remotely"),
        ("Peloton", "indoor cycling classes"),
        ("Tinder", "finding a romantic partner"),
    ],
};

/// `tool`: a closed vocabulary of tools, the query a description of the
/// tool's use (both vocabularies).
const TOOL: TagSpec = TagSpec {
    name: "tool",
    class: SlotClass::Lexical,
    slot: "tool",
    query: "Which tool does {entity} use for {hint}?",
    vocab: &[
        ("hammer", "driving nails"),
        ("wrench", "tightening bolts"),
        ("screwdriver", "fastening cabinet hinges"),
        ("shovel", "moving dirt in the garden"),
        ("ladder", "reaching the roof gutters"),
        ("chisel", "carving wood"),
        ("pliers", "gripping and bending wire"),
        ("saw", "cutting planks"),
        ("drill", "boring holes through brick"),
        ("sander", "smoothing rough surfaces"),
        ("trowel", "spreading mortar"),
        ("crowbar", "prying open crates"),
        ("ruler", "drawing straight lines"),
        ("stapler", "binding paper sheets"),
        ("scissors", "trimming fabric"),
        ("multimeter", "testing electrical voltage"),
        ("wheelbarrow", "hauling bricks around a building site"),
    ],
};

/// Seed 001's tags: lexical `service`, `tool`; intent-style (phrasal)
/// `preference`, `project`, `technical`.
pub const SEED: &[TagSpec] = &[
    SERVICE,
    TOOL,
    TagSpec {
        name: "preference",
        class: SlotClass::Intent,
        slot: "usual order",
        query: "What does {entity} get when craving {hint}?",
        vocab: &[
            ("hot cocoa with marshmallows", "something warm and chocolatey"),
            ("iced lemon tea", "a cold citrus drink in summer"),
            ("spicy tuna rolls", "raw fish from a Japanese restaurant"),
            ("margherita pizza slices", "an Italian classic with basil"),
            ("kale quinoa salad", "a healthy bowl of greens and grains"),
            ("tonkotsu pork ramen", "a steaming noodle soup"),
            ("carnitas street tacos", "Mexican food in folded tortillas"),
            ("blueberry buttermilk pancakes", "a sweet breakfast stack with syrup"),
            ("mango banana smoothie", "blended fruit through a straw"),
            ("ribeye steak medium", "a grilled slab of beef"),
            ("almond butter croissant", "a flaky French pastry"),
            ("steel cut oatmeal", "a hearty porridge"),
            ("ginger kombucha bottle", "fermented fizzy brew"),
            ("chicken tikka masala", "creamy Indian curry"),
            ("salted caramel popcorn", "a snack at the cinema"),
            ("everything bagel lox", "a chewy ring of bread with cream cheese"),
            ("double espresso shot", "a strong caffeine jolt"),
        ],
    },
    TagSpec {
        name: "project",
        class: SlotClass::Intent,
        slot: "project",
        query: "What project is {entity} working on to {hint}?",
        vocab: &[
            ("restoring a vintage motorcycle", "get an old bike running again"),
            ("building a backyard greenhouse", "grow tomatoes through the winter"),
            ("writing a fantasy novel", "publish a long story about dragons and wizards"),
            ("launching a weekly podcast", "host audio shows with guests"),
            ("sewing a patchwork quilt", "make a warm bed cover from scraps"),
            ("painting a neighborhood mural", "brighten a long wall downtown"),
            ("compiling a family cookbook", "preserve grandma's recipes"),
            ("training for a marathon race", "run twenty six miles"),
            ("renovating kitchen cabinets", "modernize the room where dinner is made"),
            ("founding a fintech startup", "create a new company for payments"),
            ("coding a chess engine", "beat grandmasters with software"),
            ("recording a debut album", "release first songs from a studio"),
            ("organizing a charity gala", "raise money at a fancy dinner event"),
            ("translating a poetry collection", "bring verse into another language"),
            ("designing a board game", "invent something to play with dice and cards"),
            ("filming a wildlife documentary", "shoot a movie about animals"),
            ("mapping hiking trails", "chart paths through the hills"),
        ],
    },
    TagSpec {
        name: "technical",
        class: SlotClass::Intent,
        slot: "technical issue",
        query: "Which technical issue is {entity} fighting: {hint}?",
        vocab: &[
            ("flaky integration tests", "checks that pass or fail at random"),
            ("slow database queries", "lookups taking seconds under load"),
            ("leaking heap memory", "RAM usage climbing until a crash"),
            ("expired TLS certificate", "browsers warning the site is insecure"),
            ("constant merge conflicts", "branches that clash whenever combined"),
            ("broken mobile layout", "screens look wrong on phones"),
            ("intermittent thread deadlocks", "workers freezing while waiting on each other"),
            ("DNS resolution failures", "domain names not turning into addresses"),
            ("outdated dependency versions", "libraries years behind upstream"),
            ("runaway cloud costs", "hosting spend growing every month"),
            ("tangled legacy codebase", "old software nobody understands"),
            ("noisy alerting pages", "woken at night by false alarms"),
            ("slow build times", "compiles dragging on for ages"),
            ("corrupted backup archives", "restores that cannot recover data"),
            ("misconfigured firewall rules", "ports blocked for no reason"),
            ("timezone conversion bugs", "meetings showing the wrong hour"),
            ("stale cache entries", "users seeing old content"),
        ],
    },
];

/// emend's first vocabulary: one-word answers for every tag; `project` and
/// `technical` closed vocabularies of named things.
pub const EMEND: &[TagSpec] = &[
    SERVICE,
    TOOL,
    TagSpec {
        name: "preference",
        class: SlotClass::Intent,
        slot: "usual order",
        query: "What does {entity} get when craving {hint}?",
        vocab: &[
            ("espresso", "a strong caffeine jolt"),
            ("lemonade", "something sour and cold in summer"),
            ("cocoa", "a warm chocolatey treat"),
            ("sushi", "raw fish with rice"),
            ("pizza", "cheesy slices from an oven"),
            ("salad", "leafy greens"),
            ("ramen", "a bowl of noodle soup"),
            ("tacos", "Mexican dishes in folded tortillas"),
            ("pancakes", "a sweet breakfast stack with syrup"),
            ("smoothie", "blended fruit"),
            ("steak", "grilled beef"),
            ("croissant", "a buttery French pastry"),
            ("oatmeal", "a hearty porridge"),
            ("kombucha", "fermented tea"),
            ("curry", "spicy Indian cooking"),
            ("popcorn", "a salty snack at the cinema"),
            ("bagel", "a chewy ring of bread with cream cheese"),
        ],
    },
    TagSpec {
        name: "project",
        class: SlotClass::Lexical,
        slot: "project",
        query: "Which project is {entity} working on: {hint}?",
        vocab: &[
            ("website", "building pages for the internet"),
            ("podcast", "hosting weekly audio episodes"),
            ("vegetables", "growing tomatoes in the backyard"),
            ("novel", "writing a long fiction book"),
            ("app", "a mobile phone program"),
            ("documentary", "filming a nonfiction movie"),
            ("treehouse", "a wooden hut up in the branches"),
            ("quilt", "stitching fabric patches together"),
            ("robot", "a machine that moves by itself"),
            ("mural", "painting a big wall"),
            ("cookbook", "collecting family recipes"),
            ("marathon", "training to run 26 miles"),
            ("newsletter", "emailing subscribers each month"),
            ("renovation", "redoing the kitchen"),
            ("startup", "founding a new company"),
            ("choir", "singing with a group"),
            ("album", "recording songs in a studio"),
        ],
    },
    TagSpec {
        name: "technical",
        class: SlotClass::Lexical,
        slot: "technology",
        query: "Which technology does {entity} use for {hint}?",
        vocab: &[
            ("Python", "scientific scripting in notebooks"),
            ("Rust", "borrow-checked systems code"),
            ("Kubernetes", "orchestrating containers"),
            ("PostgreSQL", "a relational database"),
            ("Redis", "an in-memory key value cache"),
            ("React", "building user interfaces in the browser"),
            ("Kafka", "streaming event logs"),
            ("Terraform", "provisioning cloud infrastructure"),
            ("Git", "version control"),
            ("Docker", "packaging services into images"),
            ("Elasticsearch", "full text search"),
            ("TensorFlow", "training neural networks"),
            ("Swift", "writing iPhone apps"),
            ("Haskell", "pure functional programming"),
            ("Nginx", "a reverse proxy web server"),
            ("Spark", "large scale batch data processing"),
            ("Jenkins", "continuous integration builds"),
        ],
    },
];

pub const FIRST: &[&str] = &[
    "Amara",
    "Bruno",
    "Celeste",
    "Dmitri",
    "Elena",
    "Farid",
    "Greta",
    "Hiro",
    "Ingrid",
    "Jonas",
    "Keiko",
    "Luca",
    "Marisol",
    "Nikhil",
    "Olga",
    "Priya",
    "Quentin",
    "Rosa",
    "Soren",
    "Tamsin",
    "Ulric",
    "Valentina",
    "Wendell",
    "Ximena",
];
pub const LAST: &[&str] = &[
    "Abbott",
    "Barlow",
    "Castillo",
    "Delgado",
    "Ellison",
    "Fairbanks",
    "Gallagher",
    "Holloway",
    "Iverson",
    "Jennings",
    "Kowalski",
    "Lindqvist",
    "Moreau",
    "Nakamura",
    "Okafor",
    "Petrov",
    "Quinlan",
    "Rasmussen",
    "Sandoval",
    "Thornton",
    "Underwood",
    "Vasquez",
    "Whitaker",
    "Yamamoto",
];
