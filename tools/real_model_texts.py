"""real_model_texts.py: the English texts of the real-model demos (tools/real_model_demo.py) and
the prompt formats the demos and the reference (integration_tests/real_model/make_reference.py)
share: a query with 64 short passages to rerank (a handful answer it, some are near misses, most
are about other things), and an instruction with documents to embed. Written for this project.
"""

# A yes/no reranking prompt in SmolLM2's chat format: the score is p("yes") against p("no") at the
# last position. SmolLM2-135M-Instruct is no trained reranker; this wording separated the passages
# that answer from the others best among the few tried.
RERANK_TEMPLATE = ("<|im_start|>system\nYou judge whether a passage answers a question.<|im_end|>\n"
                   "<|im_start|>user\nQuestion: {query}\nPassage: {passage}\n"
                   "Does the passage answer the question?<|im_end|>\n<|im_start|>assistant\n")
RERANK_TOKENS = ("yes", "no")


def rerank_prompt(query, passage):
    return RERANK_TEMPLATE.format(query=query, passage=passage)


RERANK_QUERY = "How do plants turn sunlight into food?"

RERANK_PASSAGES = [
    # answer the query
    "Photosynthesis lets plants use the energy of sunlight to make sugar from carbon dioxide and water.",
    "In the chloroplasts of a leaf, chlorophyll absorbs light and drives the reactions that build glucose.",
    "Plants capture light with green pigments and store its energy in sugars, releasing oxygen as a by-product.",
    "The light reactions split water and make ATP; the Calvin cycle then uses that energy to fix carbon into sugar.",
    "Leaves are the food factories of a plant: they take in carbon dioxide through small pores and sunlight "
    "through their surface.",
    # near misses: plants, light or food, but not the answer
    "Sunflowers turn their heads to follow the sun across the sky while they are young.",
    "Roots take up water and minerals from the soil and anchor the plant in the ground.",
    "Many houseplants grow well in indirect light and need watering about once a week.",
    "Solar panels convert sunlight into electricity using layers of silicon.",
    "Cows digest grass with the help of microbes living in their four-chambered stomach.",
    "Autumn leaves change colour when trees stop making chlorophyll before winter.",
    "Fungi cannot make their own food and instead absorb nutrients from dead matter.",
    "A balanced diet includes vegetables, fruit, grains and a source of protein.",
    "Greenhouses trap heat so that tomatoes and peppers can grow in cold climates.",
    "Some carnivorous plants catch insects to get nitrogen that poor soils lack.",
    "Seeds store starch that feeds the young plant until its first leaves open.",
    # other topics
    "The Great Wall of China was built over many centuries to protect against invasions.",
    "Jupiter is the largest planet in the solar system and has dozens of moons.",
    "A sourdough starter is a mixture of flour and water that hosts wild yeast.",
    "The violin has four strings tuned in fifths and is played with a bow.",
    "Glaciers carve deep valleys as they slowly move downhill under their own weight.",
    "The printing press made books cheaper and spread literacy across Europe.",
    "Honey bees communicate the location of flowers with a waggle dance.",
    "A compiler translates source code into machine instructions before the program runs.",
    "The Amazon river carries more water than any other river on Earth.",
    "Chess players often study openings to gain an early advantage on the board.",
    "Volcanoes form where molten rock from deep inside the Earth reaches the surface.",
    "The human heart pumps blood through the body in a closed system of vessels.",
    "Penguins live mostly in the Southern Hemisphere and cannot fly.",
    "A bicycle chain transfers the force of the pedals to the rear wheel.",
    "The Roman aqueducts brought fresh water into cities from distant springs.",
    "Lightning is a sudden discharge of static electricity built up inside storm clouds.",
    "Coffee beans are the roasted seeds of a fruit that grows on tropical shrubs.",
    "The moon's gravity pulls on the oceans and causes the tides.",
    "Marathon runners train for months to build endurance for the long race.",
    "A haiku is a short poem with three lines of five, seven and five syllables.",
    "Earthquakes happen when rocks along a fault suddenly slip past each other.",
    "The piano can play both melody and harmony across more than seven octaves.",
    "Whales breathe air through a blowhole on the top of their heads.",
    "Rainbows appear when sunlight is refracted and reflected inside raindrops.",
    "A savings account pays interest on the money kept in it.",
    "The Sahara is the largest hot desert and covers much of northern Africa.",
    "Owls hunt at night, guided by very sensitive hearing.",
    "Bread rises because yeast produces carbon dioxide gas as it ferments sugar.",
    "Satellites orbit the Earth at speeds that balance the pull of gravity.",
    "The Olympic Games began in ancient Greece as a festival in honour of Zeus.",
    "A thermostat switches the heating on and off to keep a room at a set temperature.",
    "Coral reefs are built by tiny animals that produce a hard skeleton of calcium carbonate.",
    "Vaccines train the immune system to recognise a germ without causing the disease.",
    "The Eiffel Tower was completed in Paris in eighteen eighty-nine.",
    "Butterflies taste with sensors on their feet.",
    "A lighthouse warns ships of dangerous rocks near the coast.",
    "Salt water freezes at a lower temperature than fresh water.",
    "Wolves live and hunt in packs led by a breeding pair.",
    "Paper is made from wood pulp pressed into thin sheets and dried.",
    "The speed of sound in air is much lower than the speed of light.",
    "A map projection flattens the curved surface of the Earth onto a page.",
    "Elephants use their trunks to drink, smell, lift objects and greet each other.",
    "The stock market lets companies raise money by selling shares to investors.",
    "Snowflakes form when water vapour freezes onto tiny particles in a cloud.",
    "A good night's sleep helps the brain store memories.",
    "Ants follow chemical trails left by other ants to find food.",
    "Wind turbines turn the movement of air into electrical power.",
    "The Nile flows north through eleven countries before reaching the Mediterranean Sea.",
]

# The indexes of RERANK_PASSAGES that answer RERANK_QUERY (for the demo's summary line).
RERANK_RELEVANT = range(5)

EMBED_INSTRUCTION = "Represent this sentence for searching relevant passages: "


def embed_text(document):
    return EMBED_INSTRUCTION + document


EMBED_DOCUMENTS = [
    "The cat sat quietly on the warm windowsill, watching birds in the garden.",
    "A kitten curled up in the sun by the window and watched the sparrows outside.",
    "Interest rates rose again this quarter as the central bank fought inflation.",
    "The bank raised its lending rates to slow down rising prices.",
    "The recipe calls for two cups of flour, a pinch of salt and warm water.",
    "Mix the flour with salt, then add water slowly while kneading the dough.",
]
