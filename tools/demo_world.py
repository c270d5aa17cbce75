"""The demo model's world: what a picture may hold and the words for it (no drawing here).

A scene is a background colour and one to three shapes, each of a different kind and colour, in
different places of a 3x3 grid. Everything the model says follows from the scene: captions,
answers to questions about one picture, which of several pictures matches, the chat replies.
tools/train_demo.py draws training pictures of these scenes with one renderer, tools/eval_demo.py
draws test pictures with another; both take the words from here, so the expected answer of a test
picture comes from its scene, never from a model.

Geometry both renderers keep to (fractions of the picture): a shape's radius is RADIUS of the
shorter side, stretched by up to STRETCH along one axis (area kept), rotated by up to ROTATE
degrees, centred on its place of GRID within JITTER; so shapes never touch and never leave the
picture at any aspect ratio.
"""

SHAPES = ["circle", "square", "triangle", "cross", "diamond", "ring"]
COLOURS = {"red": (215, 35, 35), "orange": (245, 135, 20), "yellow": (240, 215, 35), "green": (35, 160, 60),
           "blue": (35, 75, 215), "purple": (135, 45, 175), "black": (20, 20, 20)}
BACKGROUNDS = {"white": (245, 245, 245), "gray": (128, 128, 128), "brown": (115, 75, 45), "pink": (245, 185, 200)}
POSITIONS = {(0, 0): "at the top left", (0, 1): "at the top", (0, 2): "at the top right",
             (1, 0): "on the left", (1, 1): "in the center", (1, 2): "on the right",
             (2, 0): "at the bottom left", (2, 1): "at the bottom", (2, 2): "at the bottom right"}
GRID = [0.17, 0.5, 0.83]
RADIUS = (0.08, 0.12)
STRETCH = 1.25
ROTATE = 12.0
JITTER = 0.02
MAX_SHAPES = 3
NUMBERS = ["zero", "one", "two", "three"]
ORDINALS = ["first", "second", "third"]

CANONICAL_PROMPT = "Describe this image."
CAPTION_PROMPTS = [CANONICAL_PROMPT, "Describe the picture.", "What do you see?", "What is in this image?",
                   "Caption this image.", "What does the picture show?", "Describe the image in one sentence.",
                   "What is shown here?"]
NOT_A_SCENE = "I cannot tell what this picture shows."
NO_PICTURE = "Please show me a picture and I will describe it."
GREETINGS = ["Hello.", "Hi!", "Hello, who are you?", "What can you do?", "Good morning.", "How are you?",
             "Tell me a story.", "What is the capital of France?", "Thank you.", "Can you help me?"]


def picture_label(i):
    """The line after the i-th (0-based) image of a turn with several images: each picture gets its
    own cross-attention group this way (consecutive <|image|> tokens would all see every picture, in
    no order). examples/mllama.c writes the same text."""
    return f"Picture {i + 1}.\n"


def multi_image_text(n_images, prompt):
    """The user text after the first <|image|> of a turn with n_images (>= 2) pictures: the prompt,
    then each picture's label, every further picture's <|image|> before its own. A text row sees only
    the picture whose <|image|> last came before it (transformers' cross-attention rule), so the
    answer sees the last picture alone; with the prompt before the labels, each label's tokens read
    the question while they see their picture, and can tell whether it matches. examples/mllama.c
    writes the same text."""
    return prompt + "\n" + "".join(("<|image|>" if i else "") + picture_label(i) for i in range(n_images))


def sort_shapes(shapes):
    """Reading order: row by row, left to right."""
    return sorted(shapes, key=lambda s: s["pos"])


def article(word):
    return "an" if word[:1] in ("a", "e", "i", "o", "u") else "a"


def phrase(s):
    return f"{article(s['colour'])} {s['colour']} {s['shape']} {POSITIONS[s['pos']]}"


def caption_of(scene):
    parts = [phrase(s) for s in sort_shapes(scene["shapes"])]
    if len(parts) == 1:
        body = parts[0]
    else:
        body = ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{body} on {article(scene['bg'])} {scene['bg']} background"


def find(scene, key, value):
    for s in scene["shapes"]:
        if s[key] == value:
            return s
    return None


# Questions about one picture: kind -> templates. {shape} / {colour} are filled in by ask().
QUESTIONS = {
    "colour": ["What colour is the {shape}?", "Which colour is the {shape}?"],
    "shape": ["What shape is the {colour} one?", "Which shape is {colour}?"],
    "count": ["How many shapes are there?", "How many shapes do you see?", "Count the shapes."],
    "position": ["Where is the {shape}?", "Where is the {colour} shape?"],
    "background": ["What colour is the background?"],
    "exists": ["Is there a {shape}?", "Is there {a_colour} shape?"],
}
QUESTION_KINDS = list(QUESTIONS)


def ask(scene, kind, template, shape, colour):
    """-> (question, answer) for a scene. shape/colour: the one asked about (maybe absent)."""
    q = template.format(shape=shape, colour=colour, a_colour=f"{article(colour)} {colour}")
    if kind == "colour":
        s = find(scene, "shape", shape)
        return q, s["colour"] if s else f"there is no {shape}"
    if kind == "shape":
        s = find(scene, "colour", colour)
        return q, f"a {s['shape']}" if s else f"there is no {colour} shape"
    if kind == "count":
        return q, NUMBERS[len(scene["shapes"])]
    if kind == "position":
        if "{shape}" in template:
            s = find(scene, "shape", shape)
            return q, POSITIONS[s["pos"]] if s else f"there is no {shape}"
        s = find(scene, "colour", colour)
        return q, POSITIONS[s["pos"]] if s else f"there is no {colour} shape"
    if kind == "background":
        return q, scene["bg"]
    if kind == "exists":
        if "{shape}" in template:
            return q, "yes" if find(scene, "shape", shape) else "no"
        return q, "yes" if find(scene, "colour", colour) else "no"
    raise ValueError(kind)


# Questions about several pictures: exactly one or none of them matches.
WHICH = {
    "colour": "Which picture shows {a_colour} shape?",
    "shape": "Which picture shows a {shape}?",
    "count": "Which picture has {number} {shapes}?",
    "background": "Which picture has a {bg} background?",
}


def which_matches(scene, kind, value):
    if kind == "colour":
        return find(scene, "colour", value) is not None
    if kind == "shape":
        return find(scene, "shape", value) is not None
    if kind == "count":
        return NUMBERS[len(scene["shapes"])] == value
    if kind == "background":
        return scene["bg"] == value
    raise ValueError(kind)


def which_question(kind, value):
    return WHICH[kind].format(a_colour=f"{article(value)} {value}", shape=value, number=value, bg=value,
                              shapes="shape" if value == "one" else "shapes")


def which_answer(scenes, kind, value):
    """'the second one', or 'none of them'; None when several match (not asked)."""
    hits = [i for i, s in enumerate(scenes) if which_matches(s, kind, value)]
    if len(hits) > 1:
        return None
    return f"the {ORDINALS[hits[0]]} one" if hits else "none of them"


def which_values(kind):
    if kind == "colour":
        return list(COLOURS)
    if kind == "shape":
        return list(SHAPES)
    if kind == "count":
        return NUMBERS[1:]
    return list(BACKGROUNDS)


def random_scene(rng, n_shapes=None):
    """A scene drawn uniformly: 1-3 shapes of different kinds, colours and places."""
    n = int(rng.integers(1, MAX_SHAPES + 1)) if n_shapes is None else n_shapes
    shapes = rng.choice(len(SHAPES), n, replace=False)
    colours = rng.choice(len(COLOURS), n, replace=False)
    cells = rng.choice(9, n, replace=False)
    bg = list(BACKGROUNDS)[int(rng.integers(len(BACKGROUNDS)))]
    return dict(bg=bg, shapes=[dict(shape=SHAPES[int(s)], colour=list(COLOURS)[int(c)], pos=(int(p) // 3, int(p) % 3))
                               for s, c, p in zip(shapes, colours, cells)])


def random_question(rng, scene, kinds=None):
    """-> (kind, question, answer); the asked shape or colour is in the picture 3 times in 4."""
    kinds = kinds or QUESTION_KINDS
    kind = kinds[int(rng.integers(len(kinds)))]
    tpls = QUESTIONS[kind]
    tpl = tpls[int(rng.integers(len(tpls)))]
    present = scene["shapes"][int(rng.integers(len(scene["shapes"])))]
    if rng.random() < 0.75 or kind in ("count", "background"):
        shape, colour = present["shape"], present["colour"]
    else:
        absent = [s for s in SHAPES if not find(scene, "shape", s)]
        shape = absent[int(rng.integers(len(absent)))]
        absent_c = [c for c in COLOURS if not find(scene, "colour", c)]
        colour = absent_c[int(rng.integers(len(absent_c)))]
    q, a = ask(scene, kind, tpl, shape, colour)
    return kind, q, a


def answer_words():
    """Every answer and prompt text (for the tokenizer's corpus)."""
    out = list(CAPTION_PROMPTS) + [NOT_A_SCENE, NO_PICTURE] + GREETINGS + list(NUMBERS) + list(POSITIONS.values())
    for kind, tpls in QUESTIONS.items():
        for t in tpls:
            for sh in SHAPES:
                for c in COLOURS:
                    out.append(t.format(shape=sh, colour=c, a_colour=f"{article(c)} {c}"))
    for sh in SHAPES:
        out += [f"there is no {sh}", f"a {sh}"]
    for c in COLOURS:
        out.append(f"there is no {c} shape")
    for kind in WHICH:
        for v in which_values(kind):
            out.append(which_question(kind, v))
    out += [f"the {o} one" for o in ORDINALS] + ["none of them", "yes", "no"]
    out += [picture_label(i) for i in range(MAX_SHAPES)]
    return out
